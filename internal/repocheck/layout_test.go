package repocheck

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayoutNamesEveryPackage: the README's Layout section names
// each package of the module, by its path below the module or by its last
// element, so a package added without a line there fails here.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n## Layout\n")
	if i < 0 {
		t.Fatal("README.md has no Layout section")
	}
	layout := text[i+len("\n## Layout\n"):]
	if j := strings.Index(layout, "\n## "); j >= 0 {
		layout = layout[:j]
	}
	for _, p := range list(t) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		last := rel[strings.LastIndex(rel, "/")+1:]
		named := regexp.MustCompile(`(^|[\s(/])(` + regexp.QuoteMeta(rel) + `|` + regexp.QuoteMeta(last) + `)([\s/),:;]|$)`)
		if !named.MatchString(layout) {
			t.Errorf("README.md's Layout does not name package %s", rel)
		}
	}
}
