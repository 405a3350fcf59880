package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

func TestLoadTaskPolicy(t *testing.T) {
	tests := []struct {
		name, doc string
		want      *job.Policy
		err       string
	}{
		{"yaml", "allowed_commands: [claude, {basename: git, path: /usr/bin/git}]\nallow_shell: false\nallowed_env: [DEBUG]\n",
			&job.Policy{AllowedCommands: []job.CommandRule{{Basename: "claude"}, {Basename: "git", Path: "/usr/bin/git"}}, AllowedEnv: []string{"DEBUG"}}, ""},
		{"json", `{"allowed_commands": ["sh"], "allow_shell": true, "exec_scope": "every_process"}`,
			&job.Policy{AllowedCommands: []job.CommandRule{{Basename: "sh"}}, AllowShell: true, ExecScope: job.ExecScopeEveryProcess}, ""},
		{"unknown field", "allowed_comands: [sh]\n", nil, "unknown field"},
		{"network", "allowed_commands: [sh]\nnetwork: host\n", nil, "vm.network_mode"},
		{"allowed hosts", "allowed_hosts: [example.com]\n", nil, "vm.network_mode"},
		{"artifact globs", "artifact_globs: ['**']\n", nil, "artifact_patterns"},
		{"bad rule", "allowed_commands: [/bin/sh]\n", nil, "basename without '/'"},
		{"bad exec scope", "exec_scope: everything\n", nil, "exec_scope"},
		{"not a policy", "- sh\n", nil, "not a job policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "policy")
			if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := loadTaskPolicy(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("loadTaskPolicy(%q) = %+v, %v; want an error with %q", tt.doc, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadTaskPolicy(%q): %v", tt.doc, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("loadTaskPolicy(%q) (-want +got):\n%s", tt.doc, diff)
			}
		})
	}
}
