package repocheck

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Name       string
	Doc        string
	Imports    []string
	Deps       []string
}

func list(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "github.com/agent-runner/agent-runner/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range list(t) {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("package %s has no doc comment", p.ImportPath)
		}
	}
}

func TestContractImportsNothingOfTheProject(t *testing.T) {
	for _, p := range list(t) {
		if p.ImportPath != "github.com/agent-runner/agent-runner/job" {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "github.com/") || strings.HasPrefix(d, "golang.org/") || d == "net/http" || d == "os/exec" {
				t.Errorf("package job depends on %s; it must stay standard-library only and transport-free", d)
			}
		}
		return
	}
	t.Fatal("package job not found")
}

func TestBackendsDoNotImportDoors(t *testing.T) {
	doors := []string{"/httpapi", "/queue", "/mcpserver", "/cmd/", "/runner"}
	for _, p := range list(t) {
		if !strings.Contains(p.ImportPath, "/backend/") || strings.HasSuffix(p.ImportPath, "/backendtest") {
			continue
		}
		for _, d := range p.Deps {
			for _, door := range doors {
				if strings.HasPrefix(d, "github.com/agent-runner/agent-runner") && strings.Contains(d, door) {
					t.Errorf("backend %s imports %s: backends must not depend on the doors or the pipeline", p.ImportPath, d)
				}
			}
		}
	}
}
