package agentstep_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestRunFailureSaysWhy: a failed agent's outcome carries its own account
// of the failure (the old outcome said only "exit 1"): the stream-json
// error result, else the last error line of stderr, else its last line;
// scrubbed and at most MaxFailureBytes.
func TestRunFailureSaysWhy(t *testing.T) {
	cliStderr, err := os.ReadFile("testdata/claude-2.1.330-allowedtools-stderr.txt")
	if err != nil {
		t.Fatal(err)
	}
	errorStream, err := os.ReadFile("testdata/claude-2.1.330-error.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	heredoc := func(b []byte, fd string) string {
		return "cat <<'RECORDED' " + fd + "\n" + string(b) + "\nRECORDED\n"
	}
	long := strings.Repeat("x", 3000)
	tests := []struct {
		name, script string
		want         func(string) bool
		wantText     string
	}{
		{"Claude Code's stderr", heredoc(cliStderr, ">&2") + "exit 1",
			func(s string) bool {
				return s == "Error: Input must be provided either through stdin or as a prompt argument when using --print"
			}, "the CLI's Error line"},
		{"stream-json error result", heredoc(errorStream, "") + "echo 'Error: something else' >&2; exit 1",
			func(s string) bool {
				return strings.HasPrefix(s, "Prompt is too long · the request is ~250000 tokens")
			},
			"the result's text"},
		{"no error word: the last line", "echo starting >&2; echo 'out of cheese' >&2; exit 3",
			func(s string) bool { return s == "out of cheese" }, "the last line"},
		{"secret and a long line", `echo "fatal: key $API_KEY rejected ` + long + `" >&2; echo "error: $API_KEY"; exit 2`,
			func(s string) bool {
				return strings.HasPrefix(s, "fatal: key "+agentstep.Redacted+" rejected xxx") && !strings.Contains(s, secret) && len(s) <= agentstep.MaxFailureBytes+len("…")
			}, "the fatal line, scrubbed and cut"},
		{"success", "echo 'error: only a warning' >&2; exit 0",
			func(s string) bool { return s == "" }, "nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, tk, _ := staged(t, tt.script, "1h")
			out, err := agentstep.Run(context.Background(), l, tk, map[string]string{"API_KEY": secret}, agentstep.Config{Backend: tasktest.Backend(t)})
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(out.Failure) {
				t.Errorf("Failure = %q, want %s", out.Failure, tt.wantText)
			}
		})
	}
}
