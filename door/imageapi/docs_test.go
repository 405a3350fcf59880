package imageapi

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListEveryRoute keeps docs/images.md true: every route Routes
// registers is listed there.
func TestDocsListEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/images.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Patterns() {
		if !strings.Contains(string(doc), "`"+p) {
			t.Errorf("docs/images.md does not list `%s`", p)
		}
	}
}
