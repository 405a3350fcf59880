package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestLoadSandboxTemplates: --sandbox-templates reads JSON or YAML
// templates and refuses unknown fields and a policy a request could not
// carry, naming the flag.
func TestLoadSandboxTemplates(t *testing.T) {
	tests := []struct {
		doc  string
		want map[string]session.Template
		err  string
	}{
		{"py:\n  limits: {memory_mb: 512}\n  env: {A: b}\n  timeout_s: 60\n  pool: 2\n  network: {mode: disabled}\n",
			map[string]session.Template{"py": {Limits: session.Limits{MemoryMB: 512}, Env: map[string]string{"A": "b"}, TimeoutS: 60, Pool: 2, Network: &session.Network{Mode: "disabled"}}}, ""},
		{`{"sh": {"backend": "linux_sandbox", "policy": {"allowed_commands": ["cat"]}}}`,
			map[string]session.Template{"sh": {Backend: "linux_sandbox", Policy: &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}}}}, ""},
		{"py:\n  image: python:3\n", map[string]session.Template{"py": {Image: "python:3"}}, ""},
		{"py:\n  flavour: large\n", nil, "not an object of templates"},
		{"- py\n", nil, "not an object of templates"},
		{"py:\n  policy: {allowed_commands: [cat], allowed_env: [\"=\"]}\n", nil, "template py"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "templates.yaml")
		if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := loadSandboxTemplates(path)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "--sandbox-templates") {
				t.Errorf("loadSandboxTemplates(%q) = %+v, %v; want an error naming --sandbox-templates and %q", tt.doc, got, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("loadSandboxTemplates(%q): %v", tt.doc, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("loadSandboxTemplates(%q) (-want +got):\n%s", tt.doc, diff)
		}
	}
}
