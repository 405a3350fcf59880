package uitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestCapabilityRunFromThePage: a manifest naming a root outside the
// workspace roots is refused in the form; a scripted run launched from the
// page opens its run page, which shows the compiled policy, the audit
// trail with the denied call highlighted, and the hash chain verified.
func TestCapabilityRunFromThePage(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	logs := filepath.Join(s.root, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "app.log"), []byte("INFO up\nERROR disk full\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := "name: log-reader\ncapabilities:\n  tools: [list_logs, grep_log, read_log]\n  filesystem:\n    read: [logs]\nlimits:\n  max_tool_calls: 10\n"
	task := "steps:\n  - tool: list_logs\n    args: {directory: logs}\n  - tool: grep_log\n    args: {path: logs, pattern: ERROR}\n  - tool: read_log\n    args: {path: /etc/passwd}\n"

	run(t, ctx, "open the capability runs page", 20*time.Second,
		chromedp.Navigate(s.url+"/ui/#/agent-runs"),
		waitJS(`!!document.querySelector("#ar-manifest") && document.querySelector(".count").textContent.includes("No capability runs")`))

	run(t, ctx, "a root outside the workspace roots is refused", 20*time.Second,
		chromedp.SetValue("#ar-manifest", strings.Replace(manifest, "[logs]", "[/etc]", 1), chromedp.ByQuery),
		chromedp.SetValue("#ar-task", task, chromedp.ByQuery),
		chromedp.Click("#ar-launch", chromedp.ByQuery),
		waitJS(`document.querySelector("#ar-launch-error").textContent.includes("validation.path_escape")`))
	shot(t, ctx, "refused")

	run(t, ctx, "launch a scripted run", 30*time.Second,
		chromedp.SetValue("#ar-manifest", manifest, chromedp.ByQuery),
		chromedp.Click("#ar-mode-task", chromedp.ByQuery),
		chromedp.Click("#ar-launch", chromedp.ByQuery),
		waitJS(`location.hash.startsWith("#/agent-runs/") && location.hash.length > 20`),
		waitJS(`document.querySelector(".head .badge").dataset.status === "finished"`),
		waitJS(`document.querySelector("#ar-chain").dataset.ok === "true" && document.querySelector("#ar-chain").textContent.includes("Hash chain verified") && document.querySelector("#ar-chain").textContent.includes("ends with run_end")`))
	shot(t, ctx, "run-page")

	var id string
	run(t, ctx, "read the run id", 5*time.Second, chromedp.Evaluate(`decodeURIComponent(location.hash.slice("#/agent-runs/".length))`, &id))

	denied := `tr[data-denied="true"]`
	if got := text(t, ctx, denied+" td.detail"); !strings.Contains(got, "/etc/passwd") || !strings.Contains(got, "validation.path_escape") {
		t.Errorf("denied row detail = %q, want the /etc/passwd read and its code", got)
	}
	if got := text(t, ctx, denied+" td:nth-child(4)"); got != "DENIED" {
		t.Errorf("denied row decision = %q, want DENIED", got)
	}
	var deniedBG, allowedBG string
	run(t, ctx, "compare row backgrounds", 5*time.Second,
		chromedp.Evaluate(fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).backgroundColor`, denied+" td"), &deniedBG),
		chromedp.Evaluate(`getComputedStyle(document.querySelector('tr[data-event="tool_call"]:not([data-denied]) td')).backgroundColor`, &allowedBG))
	if deniedBG == allowedBG {
		t.Errorf("denied row background %s is the same as an allowed row's: not highlighted", deniedBG)
	}
	var deniedRows int
	run(t, ctx, "count denied rows", 5*time.Second, chromedp.Evaluate(`document.querySelectorAll('tr[data-denied="true"]').length`, &deniedRows))
	if deniedRows != 1 {
		t.Errorf("%d denied rows, want 1", deniedRows)
	}
	if got := text(t, ctx, "#ar-policy"); !strings.Contains(got, logs) || !strings.Contains(got, "grep_log") {
		t.Errorf("compiled policy shows %q, want the read root %s and the tools", got, logs)
	}

	var trail struct {
		Verify struct{ OK, Complete bool }
		Events []map[string]any
	}
	s.call(t, "GET", "/v1/agent-runs/"+id+"/audit", "", nil, &trail)
	if !trail.Verify.OK || !trail.Verify.Complete {
		t.Errorf("API verify = %+v, want ok and complete", trail.Verify)
	}
	if got, want := len(trail.Events), 7; got != want {
		t.Errorf("API audit has %d events, want %d (start, 3 calls, 2 results, end)", got, want)
	}

	run(t, ctx, "the list shows the run", 20*time.Second,
		hashTo("#/agent-runs"),
		waitJS(fmt.Sprintf(`!!document.querySelector('tr[data-run=%q] .badge[data-status="finished"]')`, id)),
		waitJS(fmt.Sprintf(`document.querySelector('tr[data-run=%q]').textContent.includes("3 (1)")`, id)))
	shot(t, ctx, "list")
}
