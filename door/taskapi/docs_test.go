package taskapi_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/door/taskapi"
)

// TestDocsListEveryRoute keeps docs/tasks.md true: every route the API
// registers appears in its route table.
func TestDocsListEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/tasks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range taskapi.Patterns() {
		p = strings.ReplaceAll(p, "{name...}", "{name}")
		if !strings.Contains(string(doc), "`"+p+"`") {
			t.Errorf("docs/tasks.md does not list `%s`", p)
		}
	}
}
