package uitest

import (
	"encoding/json"
	"fmt"
	"net/http"
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

// TestCapabilityRunsFollowTheStreamWithoutPolling: once the capability
// runs list has loaded, a run launched afterwards appears on it, running
// and then finished with its calls and denials, through GET /v1/events
// alone: no list request (GET /v1/agent-runs?...) after the first. A run's
// page opened while the run is in progress re-reads the run and its audit
// trail only on the run's events: while a 4 s tool call runs it reads
// nothing (it once re-read every second), and after the run ended it reads
// nothing more.
func TestCapabilityRunsFollowTheStreamWithoutPolling(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	logs := filepath.Join(s.root, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "app.log"), []byte("INFO up\nERROR disk full\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := "name: slow-reader\ncapabilities:\n  tools: [list_logs, read_log, run_tests]\n  filesystem:\n    read: [logs]\n  commands:\n    allow: [/bin/sleep]\nlimits:\n  max_tool_calls: 10\n"
	task := "steps:\n  - tool: list_logs\n    args: {directory: logs}\n  - tool: run_tests\n    args: {command: /bin/sleep, working_directory: logs, args: [\"4\"]}\n  - tool: read_log\n    args: {path: /etc/passwd}\n"
	launch := func() string {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"manifest_yaml": manifest, "mode": "task", "task_yaml": task})
		var info struct {
			RunID string `json:"run_id"`
		}
		if code := s.call(t, "POST", "/v1/agent-runs", "application/json", body, &info); code != http.StatusAccepted {
			t.Fatalf("POST /v1/agent-runs = %d, want 202", code)
		}
		return info.RunID
	}
	requests := logRequests(ctx)

	run(t, ctx, "open the capability runs page", 20*time.Second,
		chromedp.Navigate(s.url+"/ui/#/agent-runs"),
		waitJS(`!!document.querySelector(".count") && document.querySelector(".count").textContent.includes("No capability runs")`))
	loaded := requests.mark()
	if got := requests.since(0, "GET /v1/events"); len(got) != 1 {
		t.Fatalf("requests to the event stream when the page loaded = %q, want one", got)
	}
	first := launch()
	row := fmt.Sprintf(`tr[data-run=%q]`, first)
	run(t, ctx, "the run appears running, then finished", 40*time.Second,
		waitJS(fmt.Sprintf(`!!document.querySelector(%q)`, row+` .badge[data-status="running"]`)),
		waitJS(fmt.Sprintf(`!!document.querySelector(%q)`, row+` .badge[data-status="finished"]`)),
		waitJS(fmt.Sprintf(`document.querySelector(%q).textContent.includes("3 (1)")`, row)))
	if got := requests.since(loaded, "GET /v1/agent-runs?"); len(got) > 0 {
		t.Errorf("list requests after the page loaded = %q, want none (the stream carries the changes)", got)
	}
	if got := requests.since(loaded, "GET /v1/events"); len(got) > 0 {
		t.Errorf("the event stream was opened again = %q, want it kept open", got)
	}
	shot(t, ctx, "live-list")

	second := launch()
	runPath := "/v1/agent-runs/" + second
	run(t, ctx, "open the run's page while it runs", 20*time.Second,
		hashTo("#/agent-runs/"+second),
		waitJS(`!!document.querySelector('#ar-audit-body tr[data-event="tool_result"]')`))
	var status string
	run(t, ctx, "read the status shown", 5*time.Second, chromedp.Evaluate(`document.querySelector(".head .badge").dataset.status`, &status))
	if status != "running" {
		t.Fatalf("run page shows %q after the first call, want running (the 4 s call follows)", status)
	}
	mark := requests.mark()
	// The second call sleeps 4 s: a page re-reading on a timer reads
	// then; one following the events reads on the second call's event,
	// the third's and the end's.
	run(t, ctx, "the run page follows the run to its end", 40*time.Second,
		waitJS(`document.querySelector(".head .badge").dataset.status === "finished"`),
		waitJS(`document.querySelectorAll('#ar-audit-body tr[data-denied="true"]').length === 1`),
		waitJS(`document.querySelector("#ar-chain").textContent.includes("ends with run_end")`))
	ended := requests.mark()
	time.Sleep(2 * time.Second)
	var runs, audits int
	for _, r := range requests.since(mark, "GET "+runPath) {
		switch strings.TrimPrefix(r, "GET "+runPath) {
		case "":
			runs++
		case "/audit":
			audits++
		}
	}
	if runs < 1 || runs > 3 || audits != runs {
		t.Errorf("after the first call the page read the run %d times and its audit %d times, want 1 to 3 each (one per event: the 2 calls left and the end)", runs, audits)
	}
	if got := requests.since(ended, "GET "); len(got) > 0 {
		t.Errorf("requests after the run ended = %q, want none", got)
	}
	if got := requests.since(loaded, "GET /v1/agent-runs?"); len(got) > 0 {
		t.Errorf("list requests = %q, want none", got)
	}
	shot(t, ctx, "live-run-page")
}
