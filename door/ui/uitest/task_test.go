package uitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestTaskTerminalShowsLiveOutput: the tasks list, open before the
// submit, shows the task arrive and run from the event stream alone; the
// task page's terminal shows the agent's first line, in its ANSI colour,
// while the agent still runs (it waits for a gate file the test creates
// only after seeing the line); then the rest, the timeline to completed
// and the patch as a diff.
func TestTaskTerminalShowsLiveOutput(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	gate := filepath.Join(t.TempDir(), "gate")
	origin := tasktest.Origin(t, map[string]string{
		"a.txt": "one\n",
		"agent.sh": "printf '\\033[1;32mfirst-line-green\\033[0m plain\\n'\n" +
			"printf '\\033[34m[tool]\\033[0m Read a.txt\\n\\033[33mnote:\\033[0m waiting for review\\n\\033[38;5;208m256-colour\\033[0m \\033[7minverse\\033[0m\\n'\n" +
			"i=0; while [ ! -e " + gate + " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n" +
			"echo second-line\necho changed-by-agent > a.txt\n",
	})
	// The repository must lie under serve's workspace root.
	repo := filepath.Join(s.root, "origin")
	if err := os.Rename(origin, repo); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`version: "1"
kind: Task
metadata: {id: ui-task, name: Live terminal, labels: {suite: ui}}
repository: {url: %q, branch: main}
claude: {prompt: "edit a.txt"}
agent: {command: ["/bin/sh", "agent.sh"]}
`, repo)
	// The tasks list, open before the submit, shows the task arrive and
	// run from its state events, with no list request after loading.
	requests := logRequests(ctx)
	run(t, ctx, "open the tasks list", 20*time.Second,
		chromedp.Navigate(s.url+"/ui/#/tasks"),
		waitJS(`document.querySelector(".count") && document.querySelector(".count").textContent.includes("No tasks")`))
	loaded := requests.mark()
	var acc map[string]any
	if code := s.call(t, "POST", "/api/v1/tasks", "application/yaml", []byte(manifest), &acc); code != 202 {
		t.Fatalf("task submit = %d %v", code, acc)
	}
	run(t, ctx, "the task appears running on the list", 60*time.Second,
		waitJS(`!!document.querySelector('tr[data-task="ui-task"] .badge[data-status="running"]')`),
		waitJS(`document.querySelector('tr[data-task="ui-task"]').textContent.includes("Live terminal")`),
		waitJS(`document.querySelector(".count").textContent.includes("of 1")`))
	if got := requests.since(loaded, "GET /api/v1/tasks?"); len(got) > 0 {
		t.Errorf("task list requests after the list loaded = %q, want none (the stream carries the changes)", got)
	}
	run(t, ctx, "the terminal shows the first line", 60*time.Second,
		chromedp.Click(`tr[data-task="ui-task"] a`, chromedp.ByQuery),
		waitJS(`document.querySelector("#terminal").textContent.includes("first-line-green")`))
	var st struct{ State string }
	s.call(t, "GET", "/api/v1/tasks/ui-task", "", nil, &st)
	if st.State != "running" {
		t.Fatalf("task state while its first line shows = %q, want running (the agent waits for the gate)", st.State)
	}
	var colour, weight string
	run(t, ctx, "read the line's style", 10*time.Second,
		chromedp.Evaluate(`getComputedStyle(document.querySelector("#terminal span")).color`, &colour),
		chromedp.Evaluate(`getComputedStyle(document.querySelector("#terminal span")).fontWeight`, &weight))
	if colour != "rgb(70, 185, 70)" || weight != "700" {
		t.Errorf("first line styled colour %s weight %s, want rgb(70, 185, 70) (SGR 32) weight 700 (SGR 1)", colour, weight)
	}
	if got := text(t, ctx, "#terminal"); got == "" || strings.Contains(got, "second-line") {
		t.Errorf("terminal before the gate = %q, want the first line only", got)
	}
	shot(t, ctx, "live")

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "the task completes with its patch", 60*time.Second,
		waitJS(`document.querySelector("#terminal").textContent.includes("second-line")`),
		waitJS(`!!document.querySelector('.head .badge[data-status="completed"]')`),
		waitJS(`!!document.querySelector('#timeline .badge[data-status="completed"]')`),
		waitJS(`!!document.querySelector('#patch .dl.add') && document.querySelector('#patch').textContent.includes("+changed-by-agent")`))
	shot(t, ctx, "completed")

	run(t, ctx, "the tasks list shows it completed", 20*time.Second,
		hashTo("#/tasks?state=completed"),
		waitJS(`!!document.querySelector('tr[data-task="ui-task"] .badge[data-status="completed"]')`))
	shot(t, ctx, "list")
}
