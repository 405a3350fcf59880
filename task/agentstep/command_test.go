package agentstep_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// TestCommand: the Claude Code command line. Claude Code's --allowedTools
// is variadic: the old `--allowedTools T PROMPT` made the CLI (2.1.x) take
// the prompt as a tool and exit 1 ("Input must be provided",
// testdata/claude-2.1.330-allowedtools-stderr.txt). Each tool is one
// `--allowedTools=T` argument and `--` precedes the prompt; Claude Code
// 2.1.330 ran `--allowedTools=Bash -- "say hi"` and allowed its Bash call
// by that rule (testdata/claude-2.1.330-tool.jsonl).
func TestCommand(t *testing.T) {
	no := false
	base := []string{"claude", "--print", "--verbose", "--output-format", "stream-json", "--model", manifest.DefaultModel}
	tests := []struct {
		name   string
		claude manifest.Claude
		agent  *manifest.Agent
		want   []string
	}{
		{"defaults", manifest.Claude{Prompt: "fix it"}, nil,
			append(base[:len(base):len(base)], "--dangerously-skip-permissions", "--", "fix it")},
		{"allowed tools", manifest.Claude{Prompt: "fix it", AllowedTools: []string{"Read", "Bash(git diff:*)", "Edit"}}, nil,
			append(base[:len(base):len(base)], "--dangerously-skip-permissions", "--allowedTools=Read", "--allowedTools=Bash(git diff:*)", "--allowedTools=Edit", "--", "fix it")},
		{"a tool that looks like an option", manifest.Claude{Prompt: "p", AllowedTools: []string{"--model"}}, nil,
			append(base[:len(base):len(base)], "--dangerously-skip-permissions", "--allowedTools=--model", "--", "p")},
		{"max turns, permissions asked", manifest.Claude{Prompt: "p", MaxTurns: 7, SkipPermissions: &no}, nil,
			append(base[:len(base):len(base)], "--max-turns", "7", "--", "p")},
		{"a prompt starting with a dash", manifest.Claude{Prompt: "--help me"}, nil,
			append(base[:len(base):len(base)], "--dangerously-skip-permissions", "--", "--help me")},
		{"agent.env only keeps Claude Code", manifest.Claude{Prompt: "p"}, &manifest.Agent{Env: map[string]string{"DEBUG": "1"}},
			append(base[:len(base):len(base)], "--dangerously-skip-permissions", "--", "p")},
		{"agent.command", manifest.Claude{Prompt: "p", AllowedTools: []string{"Read"}}, &manifest.Agent{Command: []string{"/usr/bin/codex", "exec"}},
			[]string{"/usr/bin/codex", "exec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.claude.Model, tt.claude.OutputFormat = manifest.DefaultModel, manifest.DefaultOutputFormat
			got := agentstep.Command(&manifest.Task{Claude: tt.claude, Agent: tt.agent})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Command() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
