package agentstep_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestAgentEnvReachesTheAgent: agent.env is in the agent's environment
// (and in BaseEnv, which `task shell` uses), and is not scrubbed.
func TestAgentEnvReachesTheAgent(t *testing.T) {
	l, tk, _ := staged(t, `printf '%s|%s|%s\n' "$FEATURE_FLAG" "${EMPTY-unset}" "$TASK_ID"`, "1h")
	tk.Agent.Env = map[string]string{"FEATURE_FLAG": "on with spaces", "EMPTY": ""}
	out, err := agentstep.Run(context.Background(), l, tk, nil, agentstep.Config{Backend: tasktest.Backend(t)})
	if err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("run = %+v %v", out, err)
	}
	stdout, _ := os.ReadFile(filepath.Join(l.Progress(), "stdout.log"))
	if got, want := string(stdout), "on with spaces||task-e2e\n"; got != want {
		t.Errorf("agent printed %q, want %q", got, want)
	}
	got := agentstep.BaseEnv(tk, "/h", tasktest.Backend(t))
	want := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/h", "LANG=C.UTF-8", "TASK_ID=task-e2e", "EMPTY=", "FEATURE_FLAG=on with spaces"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BaseEnv mismatch (-want +got):\n%s", diff)
	}
}

// TestRedactionDoesNotBreakProgress: a secret whose value also occurs in
// the stream-json itself ("tool_use") is redacted from the log, and the
// progress still counts the tool calls: progress reads the agent's output
// before scrubbing. The old tracker parsed the scrubbed lines and counted
// none.
func TestRedactionDoesNotBreakProgress(t *testing.T) {
	script := `printf '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Read"}]}}\n'
printf '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"b","name":"tool_use"}]}}\n'`
	l, tk, _ := staged(t, script, "1h")
	out, err := agentstep.Run(context.Background(), l, tk, map[string]string{"WORD": "tool_use"}, agentstep.Config{Backend: tasktest.Backend(t)})
	if err != nil {
		t.Fatal(err)
	}
	if p := out.Progress; p.ToolCalls != 2 || p.Events != 2 {
		t.Errorf("progress = %+v, want 2 tool calls in 2 events", p)
	}
	// The tool's name is the secret: progress keeps it redacted.
	if got := out.Progress.CurrentTool; got != agentstep.Redacted {
		t.Errorf("current_tool = %q, want %q", got, agentstep.Redacted)
	}
	stdout, _ := os.ReadFile(filepath.Join(l.Progress(), "stdout.log"))
	if strings.Contains(string(stdout), "tool_use") {
		t.Errorf("stdout.log = %q, want the secret redacted", stdout)
	}
}
