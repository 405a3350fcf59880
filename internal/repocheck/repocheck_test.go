package repocheck

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range list(t) {
		if strings.TrimSpace(doc(t, p)) == "" {
			t.Errorf("package %s has no doc comment", p.ImportPath)
		}
	}
}

// doc is p's doc comment: go list's, from its non-test files, or for a
// package of tests only (no non-test files), the first one in its tests.
func doc(t *testing.T, p pkg) string {
	t.Helper()
	if len(p.GoFiles) > 0 {
		return p.Doc
	}
	for _, name := range slices.Concat(p.TestGoFiles, p.XTestGoFiles) {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			return f.Doc.Text()
		}
	}
	return ""
}
