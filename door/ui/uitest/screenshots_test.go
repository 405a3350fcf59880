package uitest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDocsScreenshots saves the pictures docs/ui.md shows: the task page
// of a finished task with output (ui-task.png) and the jobs list
// (ui-jobs.png), into $UI_SCREENSHOTS (skipped when unset):
//
//	UI_SCREENSHOTS=$PWD/docs go test -run TestDocsScreenshots ./ui/uitest
func TestDocsScreenshots(t *testing.T) {
	dir := os.Getenv("UI_SCREENSHOTS")
	if dir == "" {
		t.Skip("UI_SCREENSHOTS is not set (a directory to save the docs' screenshots in)")
	}
	ctx := newBrowser(t)
	s := startServe(t, "")
	s.submitTask(t, "fix-flaky-test", "printf '\\033[1;34m[agent]\\033[0m reading the failing test\\n'\n"+
		"printf '\\033[34m[tool]\\033[0m Read a.txt\\n'; sleep 0.2\n"+
		"echo 'warning: the test depends on wall-clock time' >&2; sleep 0.2\n"+
		"printf '\\033[34m[tool]\\033[0m Edit a.txt\\n'; echo two > a.txt; sleep 0.2\n"+
		"i=1; while [ $i -le 12 ]; do printf '\\033[32mok\\033[0m   case %02d\\n' $i; i=$((i+1)); done; sleep 0.2\n"+
		"echo 'note: 12 cases pass' >&2; sleep 0.2\n"+
		"printf '\\033[1;32mdone:\\033[0m the test no longer sleeps\\n'\n")
	for _, argv := range [][]string{{"sh", "-c", "echo build"}, {"sh", "-c", "echo test; exit 1"}, {"sh", "-c", "echo lint"}} {
		s.submitJob(t, argv, "", nil)
		time.Sleep(20 * time.Millisecond)
	}
	run(t, ctx, "the task page of the finished task", 90*time.Second,
		chromedp.Navigate(s.url+"/ui/#/tasks/fix-flaky-test"),
		waitJS(`!!document.querySelector('.head .badge[data-status="completed"]')`),
		waitJS(`document.querySelector("#terminal").textContent.includes("no longer sleeps")`),
		waitJS(`!!document.querySelector('#patch .dl.add')`))
	save(t, ctx, filepath.Join(dir, "ui-task.png"))
	run(t, ctx, "the jobs list", 60*time.Second,
		hashTo("#/jobs"),
		waitJS(`document.querySelectorAll('#jobs-body tr .badge[data-status="completed"], #jobs-body tr .badge[data-status="failed"]').length === 3`),
		waitJS(`[...document.querySelectorAll('#jobs-body td:nth-child(5)')].every((td) => td.textContent.includes("ms") || td.textContent.includes(" s"))`))
	save(t, ctx, filepath.Join(dir, "ui-jobs.png"))
}

// TestDocsSessionScreenshot saves a session's page with a terminal and
// a file (ui-session.png) into $UI_SCREENSHOTS (skipped when unset), as
// TestDocsScreenshots does.
func TestDocsSessionScreenshot(t *testing.T) {
	dir := os.Getenv("UI_SCREENSHOTS")
	if dir == "" {
		t.Skip("UI_SCREENSHOTS is not set (a directory to save the docs' screenshots in)")
	}
	ctx := newBrowser(t)
	s := startServe(t, "")
	if code := s.call(t, "POST", "/v1/sandboxes", "application/json", []byte(`{"id": "demo", "metadata": {"owner": "me"}}`), nil); code != 201 {
		t.Fatalf("create sandbox = %d", code)
	}
	defer s.call(t, "DELETE", "/v1/sandboxes/demo", "", nil, nil)
	run(t, ctx, "the session page with a terminal", 60*time.Second,
		chromedp.Navigate(s.url+"/ui/#/sessions/demo"),
		waitJS(`!document.querySelector("#session-new-terminal").disabled`),
		chromedp.Click("#session-new-terminal", chromedp.ByQuery),
		waitJS(`document.querySelector("#session-terminal-state").textContent.startsWith("running, pid ")`),
		typeLine("printf 'print(6 * 7)\\n' > main.py; python3 main.py"),
		waitJS(rowIs("42")),
		typeLine("ls -l; stty size"),
		waitJS(rowIs("total 4")),
		chromedp.SetValue("#files-path", "main.py", chromedp.ByQuery),
		chromedp.Click("#files-open", chromedp.ByQuery),
		waitJS(`document.querySelector("#files-text").textContent === "print(6 * 7)\n"`))
	save(t, ctx, filepath.Join(dir, "ui-session.png"))
}

// save writes a full-page PNG to path.
func save(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	var png []byte
	run(t, ctx, "screenshot "+filepath.Base(path), 20*time.Second, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %s", path)
}
