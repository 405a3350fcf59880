package repocheck

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// module is the import path of this repository's module. Packages of the
// module are named by their path below it ("task/state"); every other
// package by its import path ("net/http").
const module = "github.com/agent-runner/agent-runner"

// pkg is one package of the module as go list describes it.
type pkg struct {
	ImportPath string
	Dir        string
	Doc        string
	Standard   bool
	Imports    []string
	// GoFiles are the non-test files; a package of tests only has
	// none, and its doc comment in a test file.
	GoFiles, TestGoFiles, XTestGoFiles []string
}

// graph is the import graph of the module's packages and of every package
// they depend on: what each package's non-test files import.
type graph struct {
	imports map[string][]string
	// own are the module's packages, by short name (see module).
	own map[string]bool
	// std are the standard library's.
	std map[string]bool
}

// loaded is the module's packages and their import graph, listed once
// (go list -deps takes seconds).
var loaded = sync.OnceValues(func() ([]pkg, error) {
	out, err := exec.Command("go", "list", "-deps", "-json", module+"/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
})

// list returns the module's own packages, under their full import paths.
func list(t *testing.T) []pkg {
	t.Helper()
	all, err := loaded()
	if err != nil {
		t.Fatal(err)
	}
	var own []pkg
	for _, p := range all {
		if strings.HasPrefix(p.ImportPath, module+"/") {
			own = append(own, p)
		}
	}
	return own
}

// moduleGraph returns the import graph of the module and its dependencies.
func moduleGraph(t *testing.T) graph {
	t.Helper()
	all, err := loaded()
	if err != nil {
		t.Fatal(err)
	}
	g := graph{imports: map[string][]string{}, own: map[string]bool{}, std: map[string]bool{}}
	for _, p := range all {
		name := short(p.ImportPath)
		imports := make([]string, len(p.Imports))
		for i, imp := range p.Imports {
			imports[i] = short(imp)
		}
		g.imports[name] = imports
		g.own[name] = name != p.ImportPath
		g.std[name] = p.Standard
	}
	return g
}

// short names a package of the module by its path below the module.
func short(path string) string {
	if rel, ok := strings.CutPrefix(path, module+"/"); ok {
		return rel
	}
	return path
}

// under reports whether p is root or a package below it.
func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// underAny reports whether p is under one of roots.
func underAny(p string, roots ...string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return under(p, r) })
}
