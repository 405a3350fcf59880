package agentapi

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListEveryRoute keeps docs/agents.md true: every route Routes
// registers is listed there.
func TestDocsListEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Patterns() {
		if !strings.Contains(string(doc), "`"+p+"`") {
			t.Errorf("docs/agents.md does not list `%s`", p)
		}
	}
}
