package uitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/task/tasktest"
)

// submitTask submits a task whose agent runs script (sh) over a
// one-file repository under serve's workspace root.
func (s *server) submitTask(t *testing.T, id, script string) {
	t.Helper()
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n", "agent.sh": script})
	repo := filepath.Join(s.root, "origin-"+id)
	if err := os.Rename(origin, repo); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`version: "1"
kind: Task
metadata: {id: %s, name: %s, labels: {suite: ui}}
repository: {url: %q, branch: main}
claude: {prompt: "edit a.txt"}
agent: {command: ["/bin/sh", "agent.sh"]}
`, id, id, repo)
	var acc map[string]any
	if code := s.call(t, "POST", "/api/v1/tasks", "application/yaml", []byte(manifest), &acc); code != 202 {
		t.Fatalf("task submit = %d %v", code, acc)
	}
}

// waitGate is agent shell that waits (up to 60 s) for the file gate.
func waitGate(gate string) string {
	return "i=0; while [ ! -e " + gate + " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n"
}

// TestTerminalKeepsUpWithAFlood: an agent that writes 1 MB at once (12000
// lines, some coloured), then a sentinel line, and then waits: the
// sentinel appears in the terminal within the wait, the page answering
// all along (each poll is a script the page runs); the DOM keeps at most
// 5000 lines, and the note counts every line and offers the full log.
// Destroy stays disabled while the task runs and is enabled once it ends.
func TestTerminalKeepsUpWithAFlood(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	gate := filepath.Join(t.TempDir(), "gate")
	line := strings.Repeat("f", 70)
	s.submitTask(t, "flood", "i=0; while [ $i -lt 12000 ]; do echo \"\033[36mflood\033[0m $i "+line+"\"; i=$((i+1)); done\n"+
		"echo FLOOD-SENTINEL-END\n"+waitGate(gate))
	run(t, ctx, "the flood's last line appears while the task runs", 90*time.Second,
		chromedp.Navigate(s.url+"/ui/#/tasks/flood"),
		waitJS(`!!document.querySelector('.head .badge[data-status="running"]')`),
		waitJS(`[...document.querySelectorAll("#terminal .tl")].some((d) => d.textContent === "FLOOD-SENTINEL-END")`))
	var lines int
	var note string
	var destroyDisabled bool
	run(t, ctx, "read the terminal", 10*time.Second,
		chromedp.Evaluate(`document.querySelectorAll("#terminal .tl").length`, &lines),
		chromedp.Evaluate(`document.querySelector(".term-note").textContent`, &note),
		chromedp.Evaluate(`document.querySelector("#task-destroy").disabled`, &destroyDisabled))
	if lines > 5000 {
		t.Errorf("terminal keeps %d lines in the DOM, want at most 5000", lines)
	}
	if want := "12001 lines; 7001 earlier lines not shown, download the full log"; !strings.Contains(note, want) {
		t.Errorf("terminal note = %q, want it to say %q", note, want)
	}
	if !destroyDisabled {
		t.Error("Destroy is enabled on a running task, want disabled until the task ends")
	}
	shot(t, ctx, "flooded")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "the task completes and Destroy is enabled", 60*time.Second,
		waitJS(`!!document.querySelector('.head .badge[data-status="completed"]')`),
		waitJS(`!document.querySelector("#task-destroy").disabled`))
}

// TestTerminalInterleavesStdoutAndStderr: lines the agent writes to
// stdout and stderr in turn show in that order, stderr marked. Once the
// task ends, the panels speak of what was recorded: Output is not 0 B,
// and the CPU panel does not wait for a heartbeat.
func TestTerminalInterleavesStdoutAndStderr(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	gate := filepath.Join(t.TempDir(), "gate")
	s.submitTask(t, "mixed", "echo ready\n"+waitGate(gate)+
		"for i in 1 2 3; do echo out-$i; sleep 0.3; echo err-$i >&2; sleep 0.3; done\n")
	run(t, ctx, "the task page shows the agent running", 60*time.Second,
		chromedp.Navigate(s.url+"/ui/#/tasks/mixed"),
		waitJS(`document.querySelector("#terminal").textContent.includes("ready")`))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "the task completes", 60*time.Second,
		waitJS(`!!document.querySelector('.head .badge[data-status="completed"]')`),
		waitJS(`document.querySelector("#terminal").textContent.includes("err-3")`))
	var got []string
	run(t, ctx, "read the lines", 10*time.Second, chromedp.Evaluate(
		`[...document.querySelectorAll("#terminal .tl")].filter((d) => /^(out|err)-/.test(d.textContent)).map((d) => d.textContent + (d.classList.contains("stderr") ? " (stderr)" : ""))`, &got))
	want := []string{"out-1", "err-1 (stderr)", "out-2", "err-2 (stderr)", "out-3", "err-3 (stderr)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("terminal lines (-want +got):\n%s", diff)
	}
	progress, cpu := text(t, ctx, "#progress"), text(t, ctx, "#cpu-note")
	if strings.Contains(progress, "Output0 B") {
		t.Errorf("Progress = %q with lines on screen, want their bytes counted", progress)
	}
	if strings.Contains(cpu, "no heartbeat yet") {
		t.Errorf("a finished task's CPU panel says %q", cpu)
	}
	shot(t, ctx, "interleaved")
}
