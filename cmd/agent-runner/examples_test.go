package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/docs/schemas"
	"github.com/agent-runner/agent-runner/job"
)

// TestExamples runs every examples/*-request.json through the CLI from the
// repository root and checks the status it is meant to show.
func TestExamples(t *testing.T) {
	root, _ := filepath.Abs("../..")
	want := map[string]job.Status{
		"pytest-request.json":           job.StatusCompleted,
		"timeout-request.json":          job.StatusTimedOut,
		"disallowed-shell-request.json": job.StatusPolicyDenied,
		"artifacts-request.json":        job.StatusCompleted,
	}
	files, _ := filepath.Glob(filepath.Join(root, "examples", "*-request.json"))
	if len(files) < len(want) {
		t.Fatalf("found %d example requests, want at least %d", len(files), len(want))
	}
	store := t.TempDir()
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			status, ok := want[name]
			if !ok {
				t.Fatalf("example %s has no expected status in this test", name)
			}
			data, _ := os.ReadFile(f)
			if err := schemas.ValidateRequest(data); err != nil {
				t.Fatalf("example does not match the request schema: %v", err)
			}
			if name == "pytest-request.json" {
				if out, err := exec.Command("/usr/bin/python3", "-m", "pytest", "--version").CombinedOutput(); err != nil {
					t.Skipf("pytest for /usr/bin/python3 is not installed (apt-get install python3-pytest): %s", out)
				}
			}
			cmd := exec.Command(binary, "run", "--request", f, "--store-dir", store)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			var res job.Result
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatal(err)
			}
			if res.Status != status {
				t.Fatalf("status = %s (error %+v, stdout %q, stderr %q), want %s", res.Status, res.Error, res.Stdout.Text, res.Stderr.Text, status)
			}
			switch name {
			case "pytest-request.json":
				if !strings.Contains(res.Stdout.Text, "3 passed") || len(res.Artifacts) != 1 || res.Artifacts[0].Path != "test-results/junit.xml" {
					t.Errorf("pytest example: stdout %q artifacts %+v", res.Stdout.Text, res.Artifacts)
				}
			case "disallowed-shell-request.json":
				if res.Error.Code != job.CodeShellDenied {
					t.Errorf("error = %+v, want %s", res.Error, job.CodeShellDenied)
				}
			case "artifacts-request.json":
				var got []string
				for _, a := range res.Artifacts {
					got = append(got, a.Path)
				}
				if strings.Join(got, ",") != "out/report.json,out/summary.txt" {
					t.Errorf("artifacts = %v, want report.json and summary.txt only", got)
				}
				msgs := strings.Join(res.PolicyDecision.Messages, "\n")
				for _, denied := range []string{"out/.env", "out/logs/debug.log", "out/passwd"} {
					if !strings.Contains(msgs, denied) {
						t.Errorf("policy messages lack the refusal of %s:\n%s", denied, msgs)
					}
				}
			}
		})
	}
}
