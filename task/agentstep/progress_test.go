package agentstep

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestTrackerClearsCurrentToolOnItsResult replays Claude Code 2.1.330's
// stream-json (testdata/README.md): current_tool is Bash while the tool
// runs and empty once the user line carries its tool_result. The old
// tracker cleared it only on the final result line.
func TestTrackerClearsCurrentToolOnItsResult(t *testing.T) {
	data, err := os.ReadFile("testdata/claude-2.1.330-tool.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	wantTool := []string{"", "Bash", "", "", ""} // init, tool_use, tool_result, text, result
	tr := &tracker{}
	for i, l := range lines {
		if len(l) == 0 {
			continue
		}
		tr.add(l)
		if got := tr.snapshot().CurrentTool; got != wantTool[i] {
			t.Errorf("after line %d: current_tool = %q, want %q", i+1, got, wantTool[i])
		}
	}
	p := tr.snapshot()
	if p.ToolCalls != 1 || p.Events != 5 || p.OutputBytes != int64(len(data)) {
		t.Errorf("progress = %+v, want 1 tool call, 5 events, %d bytes", p, len(data))
	}
	if f := tr.failure(); f != "" {
		t.Errorf("failure of a successful stream = %q", f)
	}
}

// TestTrackerNestedAndParallelTools: a tool started while another runs
// (a subagent's Bash under Task) is current until its result; then the
// outer one is current again.
func TestTrackerNestedAndParallelTools(t *testing.T) {
	steps := []struct{ line, want string }{
		{`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Task"}]}}`, "Task"},
		{`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Bash"},{"type":"tool_use","id":"t3","name":"Read"}]},"parent_tool_use_id":"t1"}`, "Read"},
		{`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t3"}]},"parent_tool_use_id":"t1"}`, "Bash"},
		{`{"type":"user","message":{"content":"a plain prompt"}}`, "Bash"},
		{`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2"}]}}`, "Task"},
		{`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"}]}}`, ""},
		{`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t4","name":"Edit"}]}}`, "Edit"},
		{`{"type":"result","subtype":"success","is_error":false}`, ""},
	}
	tr := &tracker{}
	for _, s := range steps {
		tr.add([]byte(s.line + "\n"))
		if got := tr.snapshot().CurrentTool; got != s.want {
			t.Errorf("after %s: current_tool = %q, want %q", s.line, got, s.want)
		}
	}
	if p := tr.snapshot(); p.ToolCalls != 4 || p.Events != len(steps) {
		t.Errorf("progress = %+v, want 4 tool calls and %d events", p, len(steps))
	}
}

// TestTrackerErrorResult: the result line of a failed run (recorded from
// Claude Code 2.1.330 after an API error) is the run's failure, scrubbed
// and bounded.
func TestTrackerErrorResult(t *testing.T) {
	data, err := os.ReadFile("testdata/claude-2.1.330-error.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracker{scrub: newScrubber([]string{"200000"})}
	tr.add(data)
	got := tr.failure()
	if !strings.HasPrefix(got, "Prompt is too long") || strings.Contains(got, "200000") || !strings.Contains(got, Redacted) {
		t.Errorf("failure = %q, want the result's text with the secret redacted", got)
	}
	if len(got) > MaxFailureBytes+len("…") {
		t.Errorf("failure is %d bytes, over %d", len(got), MaxFailureBytes)
	}
	tr = &tracker{}
	tr.add([]byte(`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["tool crashed","no more turns"]}`))
	tr.end() // no newline after the last line
	if got, want := tr.failure(), "tool crashed; no more turns"; got != want {
		t.Errorf("failure from errors = %q, want %q", got, want)
	}
}

// TestTrackerReadsLinesOverTheBuffer: a line over maxStreamLine is
// skipped whole; the next line is parsed.
func TestTrackerReadsLinesOverTheBuffer(t *testing.T) {
	tr := &tracker{}
	long := `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"x","name":"` + strings.Repeat("A", maxStreamLine) + `"}]}}`
	tr.add([]byte(long[:len(long)/2]))
	tr.add([]byte(long[len(long)/2:] + "\n"))
	tr.add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"y","name":"Read"}]}}` + "\n"))
	if p := tr.snapshot(); p.ToolCalls != 1 || p.CurrentTool != "Read" || p.Events != 1 {
		t.Errorf("progress = %+v, want only the short line counted", p)
	}
}
