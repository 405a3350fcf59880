package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// TestLoadSandboxPolicy: --sandbox-policy takes a job policy a kept
// sandbox can hold at every exec, and refuses the rest with the flag's
// name.
func TestLoadSandboxPolicy(t *testing.T) {
	tests := []struct {
		doc  string
		want *job.Policy
		err  string
	}{
		{"allowed_commands: [cat, sh]\nallow_shell: true\n", &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}, {Basename: "sh"}}, AllowShell: true}, ""},
		{`{"allowed_commands": ["cat"], "allow_shell": true, "allowed_env": ["FOO"]}`, &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}, AllowShell: true, AllowedEnv: []string{"FOO"}}, ""},
		{"allowed_commands: [cat]\n", &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}}, ""},
		{"allowed_commands: [cat]\nallow_shell: true\nexec_scope: every_process\n", nil, "exec_scope"},
		{"allow_shell: true\nnetwork: host\n", nil, "network"},
		{"allow_shell: true\nimage: x\n", nil, "not a job policy"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := loadSandboxPolicy(path)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "--sandbox-policy") {
				t.Errorf("loadSandboxPolicy(%q) = %+v, %v; want an error naming --sandbox-policy and %q", tt.doc, got, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("loadSandboxPolicy(%q): %v", tt.doc, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("loadSandboxPolicy(%q) (-want +got):\n%s", tt.doc, diff)
		}
	}
}
