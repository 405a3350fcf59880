package policy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/policy"
)

func TestSmallest(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		commands []string
		env      []string
	}{
		{"program", []string{"/bin/true"}, []string{"true"}, []string{"HOME"}},
		{"shell", []string{"/bin/sh", "-c", "exit 0"}, []string{"sh"}, []string{"HOME"}},
		{"wrappers", []string{"/usr/bin/env", "FOO=1", "timeout", "5", "sh", "-c", "true"}, []string{"env", "timeout", "sh"}, []string{"HOME", "FOO"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy.Smallest(tt.argv, []string{"HOME=/h"}, localprocess.Backend{})
			var got []string
			for _, r := range p.AllowedCommands {
				got = append(got, r.Basename)
			}
			if diff := cmp.Diff(tt.commands, got); diff != "" {
				t.Errorf("Smallest(%q) commands (-want +got):\n%s", tt.argv, diff)
			}
			if diff := cmp.Diff(tt.env, p.AllowedEnv); diff != "" || !p.AllowShell {
				t.Errorf("Smallest(%q) env (-want +got):\n%s allow_shell %v", tt.argv, diff, p.AllowShell)
			}
		})
	}
}
