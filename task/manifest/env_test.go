package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// TestAgentEnv: agent.env passes variables that are not secrets to the
// agent (before it, switches had to travel as secrets); names, values and
// the runner's own variables are checked like a job's command.env.
func TestAgentEnv(t *testing.T) {
	tests := []struct {
		name, extra string
		code        job.Code
		field       string
	}{
		{"env only", "agent: {env: {DEBUG: \"1\", CLAUDE_CODE_USE_BEDROCK: \"0\", _X: \"\"}}\n", "", ""},
		{"env with command", "agent: {command: [my-agent], env: {MODE: fast}}\n", "", ""},
		{"neither", "agent: {}\n", job.CodeInvalidRequest, "agent.command"},
		{"empty name", "agent: {env: {\"\": x}}\n", job.CodeInvalidRequest, "agent.env"},
		{"name with =", "agent: {env: {\"A=B\": x}}\n", job.CodeInvalidRequest, "agent.env"},
		{"name with a space", "agent: {env: {\"A B\": x}}\n", job.CodeInvalidRequest, "agent.env"},
		{"name starting with a digit", "agent: {env: {1A: x}}\n", job.CodeInvalidRequest, "agent.env"},
		{"NUL in a value", "agent: {env: {A: \"x\\0y\"}}\n", job.CodeInvalidRequest, "agent.env.A"},
		{"PATH", "agent: {env: {PATH: /opt/bin}}\n", job.CodeInvalidRequest, "agent.env.PATH"},
		{"HOME", "agent: {env: {HOME: /root}}\n", job.CodeInvalidRequest, "agent.env.HOME"},
		{"TASK_ID", "agent: {env: {TASK_ID: other}}\n", job.CodeInvalidRequest, "agent.env.TASK_ID"},
		{"LANG", "agent: {env: {LANG: C}}\n", job.CodeInvalidRequest, "agent.env.LANG"},
		{"the task token", "agent: {env: {AGENT_TASK_TOKEN: forged}}\n", job.CodeInvalidRequest, "agent.env.AGENT_TASK_TOKEN"},
		{"the children socket", "agent: {env: {AGENT_RUNNER_SOCKET: /tmp/s}}\n", job.CodeInvalidRequest, "agent.env.AGENT_RUNNER_SOCKET"},
		{"any AGENT_RUNNER_ name", "agent: {env: {AGENT_RUNNER_X: y}}\n", job.CodeInvalidRequest, "agent.env.AGENT_RUNNER_X"},
		{"a secret's name", "secrets: [{name: API_KEY}]\nagent: {env: {API_KEY: plain}}\n", job.CodeInvalidRequest, "agent.env.API_KEY"},
		{"value too long", "agent: {env: {A: " + strings.Repeat("x", MaxEnvValueBytes+1) + "}}\n", job.CodeInvalidRequest, "agent.env.A"},
		{"NUL in command", "agent: {command: [\"a\\0b\"]}\n", job.CodeInvalidRequest, "agent.command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(base + tt.extra))
			if got := job.CodeOf(err); got != tt.code {
				t.Fatalf("Parse = %q (%v), want %q", got, err, tt.code)
			}
			if err != nil && job.AsError(err).Details["field"] != tt.field {
				t.Errorf("field = %v, want %q", job.AsError(err).Details["field"], tt.field)
			}
		})
	}
	var many strings.Builder
	many.WriteString("agent:\n  env:\n")
	for i := range MaxEnvVars + 1 {
		many.WriteString("    V" + strings.Repeat("x", i) + ": v\n")
	}
	if _, err := Parse([]byte(base + many.String())); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("%d variables = %v, want %s", MaxEnvVars+1, err, job.CodeInvalidRequest)
	}
	tk, err := Parse([]byte(base + "agent: {env: {DEBUG: \"1\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tk.Agent, (&Agent{Env: map[string]string{"DEBUG": "1"}}); !cmp.Equal(got, want) {
		t.Errorf("Agent = %+v, want %+v", got, want)
	}
}
