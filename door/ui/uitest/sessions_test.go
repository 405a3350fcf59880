package uitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/auth"
)

// sessionServe starts serve with a token file: "admin-token" (the test's
// own API calls) and "term-token" (sessions and read, the browser's), so
// the terminal's WebSocket must carry a token as the API's requests do.
func sessionServe(t *testing.T) *server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(auth.Hash("admin-token")+" admin admin\n"+auth.Hash("term-token")+" sessions,read terminal\n"), 0o600)
	return startServe(t, "admin-token", "--token-file", file)
}

// sandboxState is the sandbox's state as the API reports it.
func (s *server) sandboxState(t *testing.T, id string) string {
	t.Helper()
	var sb struct{ State string }
	s.call(t, "GET", "/v1/sandboxes/"+id, "", nil, &sb)
	return sb.State
}

// rowIs is a JavaScript test that some rendered row of the dashboard's
// xterm reads exactly text (its trailing blanks aside; xterm.js draws a
// blank cell as a no-break space).
func rowIs(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#session-terminal .xterm-rows > div")].some((r) => r.textContent.replace(/\u00a0/g, " ").trimEnd() === %q)`, text)
}

// typeLine types line and Enter into the terminal as key events.
func typeLine(line string) chromedp.Tasks {
	return chromedp.Tasks{
		chromedp.Focus("#session-terminal .xterm-helper-textarea", chromedp.ByQuery),
		typeKeys(line + "\r"),
	}
}

// typeKeys presses each key of keys as a keyboard does: a keyDown that
// carries its text (from which the browser makes keypress and input,
// unless the page cancels the keydown, as xterm.js does), then keyUp.
// chromedp.KeyEvent instead sends the text as a separate "char" event
// after the keydown, which the browser delivers even when the page
// canceled the keydown, so a terminal would get every key twice.
func typeKeys(keys string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for _, r := range keys {
			var events []*input.DispatchKeyEventParams
			for _, k := range kb.Encode(r) {
				switch k.Type {
				case input.KeyDown:
					down := *k
					down.Text, down.UnmodifiedText = string(r), string(r)
					events = append(events, &down)
				case input.KeyUp:
					events = append(events, k)
				}
			}
			for _, e := range events {
				if err := e.Do(ctx); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// TestSessionTerminalTakesTypedInput: a sandbox created through the API
// is on the sessions list (and not under the paused tab), and one
// created while the list is open appears and turns stopped when deleted
// (session_state events); on the first one's page New terminal starts a
// shell with a pty and attaches xterm.js over the WebSocket (its token
// offered as a subprotocol: serve has a token file); keys typed into the
// terminal run `echo`, whose output shows in the terminal's rendered
// rows, drawn in the terminal's own font (xterm.js's styles apply under
// the CSP); `stty size` reports the size the terminal drew, and the new
// size after the window shrinks (channel 4); the processes list shows
// the shell; a process started from the page's form is killed with its
// button; after a second terminal, Attach on the first shell's row
// shows its earlier output again (replayed from its buffer) and takes
// input; a file written through the API is reached through the
// directory listings (root, then its directory) and shows as text
// (markup in it stays text), and so when opened by its path; Pause and Resume change the sandbox's state; `exit 3` shows
// "exited 3" (channel 3).
func TestSessionTerminalTakesTypedInput(t *testing.T) {
	ctx := newBrowser(t)
	s := sessionServe(t)
	var sb struct{ ID, State string }
	if code := s.call(t, "POST", "/v1/sandboxes", "application/json", []byte(`{"id": "ui-term", "metadata": {"suite": "ui"}}`), &sb); code != 201 || sb.State != "running" {
		t.Fatalf("create sandbox = %d %+v, want 201 running", code, sb)
	}
	t.Cleanup(func() { s.call(t, "DELETE", "/v1/sandboxes/ui-term", "", nil, nil) })

	run(t, ctx, "sign in on the sessions list", 30*time.Second,
		chromedp.Navigate(s.url+"/ui/#/sessions"),
		waitJS(`document.querySelector("#login").open`),
		chromedp.SendKeys("#token", "term-token", chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		waitJS(`!document.querySelector("#login").open`),
		waitJS(`!!document.querySelector('tr[data-sandbox="ui-term"] .badge[data-status="running"]')`))
	row := text(t, ctx, `tr[data-sandbox="ui-term"]`)
	for _, want := range []string{"ui-term", "local_process", "suite=ui", "0 / 0"} {
		if !strings.Contains(row, want) {
			t.Errorf("sessions list row = %q, want it to hold %q", row, want)
		}
	}
	if code := s.call(t, "POST", "/v1/sandboxes", "application/json", []byte(`{"id": "ui-late"}`), nil); code != 201 {
		t.Fatalf("create a second sandbox = %d, want 201", code)
	}
	run(t, ctx, "a sandbox created while the list is open appears", 20*time.Second,
		waitJS(`!!document.querySelector('tr[data-sandbox="ui-late"] .badge[data-status="running"]')`))
	s.call(t, "DELETE", "/v1/sandboxes/ui-late", "", nil, nil)
	run(t, ctx, "and turns stopped when deleted", 20*time.Second,
		waitJS(`!!document.querySelector('tr[data-sandbox="ui-late"] .badge[data-status="stopped"]')`))
	run(t, ctx, "the paused tab", 20*time.Second,
		hashTo("#/sessions?state=paused"),
		waitJS(`document.querySelector(".count").textContent === "No sandboxes match."`))
	if row := text(t, ctx, `tr[data-sandbox="ui-term"]`); row != "" {
		t.Errorf("the paused tab lists the running sandbox: %q", row)
	}
	shot(t, ctx, "list")

	run(t, ctx, "open a terminal on the session page", 30*time.Second,
		hashTo("#/sessions/ui-term"),
		waitJS(`document.querySelector("#session-record").textContent.includes("suite=ui")`),
		waitJS(`!document.querySelector("#session-new-terminal").disabled`),
		chromedp.Click("#session-new-terminal", chromedp.ByQuery),
		waitJS(`document.querySelector("#session-terminal-state").textContent.startsWith("running, pid ")`))

	run(t, ctx, "type echo into the terminal", 30*time.Second,
		typeLine("echo hello-from-xterm"),
		waitJS(rowIs("hello-from-xterm")))
	// The usage another part of serve adds to a live sandbox's record,
	// as the page shows it (local_process reads none).
	var usage [][]string
	run(t, ctx, "format a usage", 10*time.Second,
		chromedp.Evaluate(`import("/ui/session.js").then((m) => m.usageRows({cpu_time_ms: 1500, memory_bytes: 3145728, peak_memory_bytes: 1024, processes: 2}))`, &usage,
			func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if diff := cmp.Diff([][]string{{"CPU time", "1.5 s"}, {"Memory", "3.0 MiB"}, {"Peak memory", "1.0 KiB"}, {"Processes", "2"}}, usage); diff != "" {
		t.Errorf("usageRows (-want +got):\n%s", diff)
	}
	var font string
	run(t, ctx, "read the rows' font", 10*time.Second,
		chromedp.Evaluate(`getComputedStyle(document.querySelector("#session-terminal .xterm-rows")).fontFamily`, &font))
	if !strings.Contains(font, "DejaVu Sans Mono") {
		t.Errorf("terminal rows are drawn in %q, want the terminal's font (xterm.js's styles did not apply)", font)
	}
	shot(t, ctx, "echo")
	shiftTab := func(typ input.KeyType) chromedp.Action {
		return input.DispatchKeyEvent(typ).WithKey("Tab").WithCode("Tab").WithWindowsVirtualKeyCode(9).WithNativeVirtualKeyCode(9).WithModifiers(input.ModifierShift)
	}
	run(t, ctx, "Shift+Tab leaves the terminal", 10*time.Second,
		chromedp.Focus("#session-terminal .xterm-helper-textarea", chromedp.ByQuery),
		shiftTab(input.KeyRawDown), shiftTab(input.KeyUp),
		waitJS(`document.activeElement.id === "session-new-terminal"`))

	// size reads the terminal's size in cells, as the page drew it.
	size := func(what string) (rows, cols string) {
		run(t, ctx, what, 10*time.Second,
			chromedp.Evaluate(`document.querySelector("#session-terminal").dataset.rows`, &rows),
			chromedp.Evaluate(`document.querySelector("#session-terminal").dataset.cols`, &cols))
		return rows, cols
	}
	rows, cols := size("read the terminal's size")
	run(t, ctx, "stty size reports the drawn size", 30*time.Second,
		typeLine("stty size"),
		waitJS(rowIs(rows+" "+cols)))

	run(t, ctx, "shrink the window", 30*time.Second,
		emulation.SetDeviceMetricsOverride(900, 1000, 1, false),
		waitJS(fmt.Sprintf(`document.querySelector("#session-terminal").dataset.cols !== %q`, cols)))
	rows2, cols2 := size("read the terminal's new size")
	run(t, ctx, "stty size reports the new size", 30*time.Second,
		typeLine("stty size"),
		waitJS(rowIs(rows2+" "+cols2)))

	var pid string
	run(t, ctx, "read the shell's pid", 10*time.Second,
		chromedp.Evaluate(`document.querySelector("#session-terminal").dataset.pid`, &pid))
	run(t, ctx, "the processes list shows the shell", 20*time.Second,
		waitJS(fmt.Sprintf(`document.querySelector('#session-processes tr[data-pid=%q]').textContent.includes("sh (pty)")`, pid)),
		waitJS(fmt.Sprintf(`!!document.querySelector('#session-processes tr[data-pid=%q] .badge[data-status="running"]')`, pid)))
	shot(t, ctx, "processes")

	run(t, ctx, "start a process from the page and kill it", 30*time.Second,
		chromedp.SendKeys("#session-cmd", "sleep 300", chromedp.ByQuery),
		chromedp.Click("#session-start", chromedp.ByQuery),
		waitJS(`[...document.querySelectorAll("#session-processes tr")].some((r) => r.textContent.includes("sh -c sleep 300") && r.querySelector('.badge[data-status="running"]'))`),
		chromedp.Evaluate(`[...document.querySelectorAll("#session-processes tr")].find((r) => r.textContent.includes("sh -c sleep 300")).querySelector("button").click()`, nil),
		waitJS(`[...document.querySelectorAll("#session-processes tr")].some((r) => r.textContent.includes("sh -c sleep 300") && r.querySelector('.badge[data-status="canceled"]'))`))
	var procs struct {
		Processes []struct {
			Argv   []string
			Status string
		}
	}
	s.call(t, "GET", "/v1/sandboxes/ui-term/processes", "", nil, &procs)
	killed := false
	for _, p := range procs.Processes {
		killed = killed || (strings.Join(p.Argv, " ") == "sh -c sleep 300" && p.Status == "canceled")
	}
	if !killed {
		t.Errorf("the API lists %+v, want sh -c sleep 300 canceled", procs.Processes)
	}

	if code := s.call(t, "PUT", "/v1/sandboxes/ui-term/files?path=notes/hello.txt", "application/octet-stream", []byte("kept <b>as text</b>\n"), nil); code != 200 && code != 201 {
		t.Fatalf("write a file = %d", code)
	}
	run(t, ctx, "browse to the file through the listings", 20*time.Second,
		chromedp.SetValue("#files-path", ".", chromedp.ByQuery),
		chromedp.Click("#files-open", chromedp.ByQuery),
		waitJS(`document.querySelector('#files-view tr[data-path="notes"]').textContent.includes("dir")`),
		chromedp.Click(`#files-view tr[data-path="notes"] a`, chromedp.ByQuery),
		waitJS(`document.querySelector('#files-view tr[data-path="notes/hello.txt"]').textContent.includes("20 B")`),
		chromedp.Click(`#files-view tr[data-path="notes/hello.txt"] a`, chromedp.ByQuery),
		waitJS(`document.querySelector("#files-text").textContent === "kept <b>as text</b>\n"`))
	shot(t, ctx, "file")
	run(t, ctx, "a file opened by its path shows as text", 20*time.Second,
		chromedp.SetValue("#files-path", "notes", chromedp.ByQuery),
		chromedp.Click("#files-open", chromedp.ByQuery),
		waitJS(`!!document.querySelector('#files-view tr[data-path="notes/hello.txt"]')`),
		chromedp.SetValue("#files-path", "notes/hello.txt", chromedp.ByQuery),
		chromedp.Click("#files-open", chromedp.ByQuery),
		waitJS(`document.querySelector("#files-text").textContent === "kept <b>as text</b>\n"`))

	run(t, ctx, "pause from the page", 30*time.Second,
		chromedp.Click("#session-pause", chromedp.ByQuery),
		waitJS(`!!document.querySelector('.head .badge[data-status="paused"]')`),
		waitJS(`document.querySelector("#session-new-terminal").disabled && !document.querySelector("#session-resume").disabled`))
	if got := s.sandboxState(t, "ui-term"); got != "paused" {
		t.Errorf("after Pause the API says %q, want paused", got)
	}
	run(t, ctx, "resume from the page", 30*time.Second,
		chromedp.Click("#session-resume", chromedp.ByQuery),
		waitJS(`!!document.querySelector('.head .badge[data-status="running"]')`))
	if got := s.sandboxState(t, "ui-term"); got != "running" {
		t.Errorf("after Resume the API says %q, want running", got)
	}

	run(t, ctx, "Attach reattaches the terminal to the running shell", 30*time.Second,
		chromedp.Click(`#session-new-terminal`, chromedp.ByQuery),
		waitJS(`document.querySelector("#session-terminal").dataset.pid !== `+fmt.Sprintf("%q", pid)),
		waitJS(`document.querySelector("#session-terminal-state").textContent.startsWith("running, pid ")`),
		chromedp.Click(fmt.Sprintf(`#session-processes tr[data-pid=%q] button[aria-label^="Attach"]`, pid), chromedp.ByQuery),
		waitJS(fmt.Sprintf(`document.querySelector("#session-terminal-state").textContent === "running, pid %s"`, pid)),
		waitJS(rowIs("hello-from-xterm")))
	run(t, ctx, "exit ends the shell and says so", 30*time.Second,
		typeLine("exit 3"),
		waitJS(`document.querySelector("#session-terminal-state").textContent === "exited 3"`),
		waitJS(fmt.Sprintf(`document.querySelector('#session-processes tr[data-pid=%q] td:nth-child(5)').textContent === "3"`, pid)))
}

// TestSessionPageShowsUsage: a linux_sandbox sandbox's record carries
// usage (its cgroup's figures): the session page shows its CPU time,
// memory and processes. Skips, saying why, where linux_sandbox cannot
// make a sandbox or read its usage.
func TestSessionPageShowsUsage(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	os.Chmod(filepath.Dir(s.root), 0o755)
	var sb struct {
		State string
		Error *struct{ Code, Message string }
		Usage map[string]any
	}
	code := s.call(t, "POST", "/v1/sandboxes", "application/json", []byte(`{"id": "ui-usage", "backend": "linux_sandbox"}`), &sb)
	if code != 201 || sb.State != "running" {
		t.Skipf("linux_sandbox cannot make a sandbox here: %d %s %+v", code, sb.State, sb.Error)
	}
	t.Cleanup(func() { s.call(t, "DELETE", "/v1/sandboxes/ui-usage", "", nil, nil) })
	s.call(t, "GET", "/v1/sandboxes/ui-usage", "", nil, &sb)
	if sb.Usage == nil {
		t.Skip("the linux_sandbox record has no usage here (its backend could not read the cgroup's figures)")
	}
	run(t, ctx, "the page shows the usage", 30*time.Second,
		chromedp.Navigate(s.url+"/ui/#/sessions/ui-usage"),
		waitJS(`document.querySelector("#session-usage").textContent.includes("CPU time")`))
	got := text(t, ctx, "#session-usage")
	for _, want := range []string{"CPU time", "Memory", "Peak memory", "Processes", "Sampled at"} {
		if !strings.Contains(got, want) {
			t.Errorf("usage section = %q, want it to name %q", got, want)
		}
	}
	shot(t, ctx, "usage")
}
