package lifecycle_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// TestAdmit: repositories and secrets a submitter may not name. The old
// code staged any local path or file:// URL (the run store, /etc) and read
// any host variable or file a manifest named as a secret.
func TestAdmit(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	repo := filepath.Join(root, "repo")
	for _, d := range []string{filepath.Join(store, "tasks", "other", "inbox"), repo} {
		os.MkdirAll(d, 0o755)
	}
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(root, "link-out"))
	cfg := lifecycle.Config{Roots: &workspaceroot.Roots{Dirs: []string{root}, Excluded: []string{store}}, Secrets: secretsFile(t)}
	// A secret "1" would be redacted from every line of output; the old
	// code accepted it. One not readable yet is left to provisioning.
	short, unset := cfg, cfg
	short.Env = func(string) string { return "1" }
	unset.Env = func(string) string { return "" }
	tests := []struct {
		name, url string
		secrets   []manifest.Secret
		cfg       lifecycle.Config
		code      job.Code
	}{
		{"local repo under a root", repo, nil, cfg, ""},
		{"file URL under a root", "file://" + repo, nil, cfg, ""},
		{"remote repo without an egress ceiling", "https://github.com/o/r.git", nil, cfg, job.CodeNetworkDenied},
		{"remote repo within the ceiling", "https://github.com/o/r.git", nil, withEgress(cfg, "github.com"), ""},
		{"remote repo beyond the ceiling", "https://gitlab.com/o/r.git", nil, withEgress(cfg, "github.com"), job.CodeNetworkDenied},
		{"scp-like remote (not through the gateway)", "git@github.com:o/r.git", nil, withEgress(cfg, "github.com"), job.CodeNetworkDenied},
		{"local repo outside the roots", outside, nil, cfg, job.CodePathEscape},
		{"file URL into the store", "file://" + filepath.Join(store, "tasks", "other", "inbox"), nil, cfg, job.CodePathEscape},
		{"file URL to /etc", "file:///etc", nil, cfg, job.CodePathEscape},
		{"symlink out of a root", filepath.Join(root, "link-out"), nil, cfg, job.CodePathEscape},
		{"relative path climbing out", repo + "/../../x", nil, cfg, job.CodePathEscape},
		{"remote helper", "ext::sh -c id", nil, cfg, job.CodeInvalidRequest},
		{"registered env secret", repo, []manifest.Secret{{Name: "API_KEY", Source: "env", Key: "TEST_API_KEY"}}, cfg, ""},
		{"registered by name only", repo, []manifest.Secret{{Name: "GH_TOKEN"}}, cfg, ""},
		{"unregistered host env var", repo, []manifest.Secret{{Name: "AWS_SECRET_ACCESS_KEY", Source: "env", Key: "AWS_SECRET_ACCESS_KEY"}}, cfg, job.CodeForbidden},
		{"host file", repo, []manifest.Secret{{Name: "K", Source: "file", Key: "/etc/shadow"}}, cfg, job.CodeForbidden},
		{"registered name, other variable", repo, []manifest.Secret{{Name: "API_KEY", Source: "env", Key: "HOME"}}, cfg, job.CodeForbidden},
		{"registered name, host file", repo, []manifest.Secret{{Name: "GH_TOKEN", Source: "file", Key: "/etc/shadow"}}, cfg, job.CodeForbidden},
		{"vault", repo, []manifest.Secret{{Name: "API_KEY", Source: "vault", Key: "kv/x"}}, cfg, job.CodeForbidden},
		{"no secrets file", repo, []manifest.Secret{{Name: "API_KEY", Source: "env", Key: "TEST_API_KEY"}}, lifecycle.Config{}, job.CodeForbidden},
		{"no secrets file, no secrets", repo, nil, lifecycle.Config{}, ""},
		{"secret too short to scrub", repo, []manifest.Secret{{Name: "API_KEY"}}, short, job.CodeInvalidRequest},
		{"secret not readable yet", repo, []manifest.Secret{{Name: "API_KEY"}}, unset, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &manifest.Task{Repository: manifest.Repository{URL: tt.url, Branch: "main"}, Secrets: tt.secrets}
			err := lifecycle.Admit(tt.cfg, tk)
			if got := job.CodeOf(err); got != tt.code {
				t.Errorf("Admit(url %q, secrets %+v) = %v, want code %q", tt.url, tt.secrets, err, tt.code)
			}
			if len(tt.secrets) > 0 && err != nil && job.AsError(err).Details["secret"] != tt.secrets[0].Name {
				t.Errorf("Admit(secrets %+v) = %v, want the secret named in details", tt.secrets, err)
			}
		})
	}
}

// withEgress is cfg with an egress gateway whose ceiling is hosts.
func withEgress(cfg lifecycle.Config, hosts ...string) lifecycle.Config {
	g, err := egress.New(egress.Config{})
	if err != nil {
		panic(err)
	}
	rules, err := egress.ParseRules(hosts)
	if err != nil {
		panic(err)
	}
	cfg.Egress = &egress.Operator{Gateway: g, Ceiling: rules}
	return cfg
}

// TestAdmitNetwork: a task's network mode meets the operator's settings
// at submit, before anything is cloned.
func TestAdmitNetwork(t *testing.T) {
	repo := t.TempDir()
	tests := []struct {
		name, mode string
		hosts      []string
		cfg        lifecycle.Config
		code       job.Code
	}{
		{"isolated", "isolated", nil, lifecycle.Config{}, ""},
		{"outbound without a ceiling", "outbound", []string{"api.anthropic.com"}, lifecycle.Config{}, job.CodeNetworkDenied},
		{"outbound within the ceiling", "outbound", []string{"api.anthropic.com"}, withEgress(lifecycle.Config{}, "*.anthropic.com"), ""},
		{"outbound beyond the ceiling", "outbound", []string{"api.anthropic.com", "evil.example"}, withEgress(lifecycle.Config{}, "*.anthropic.com"), job.CodeNetworkDenied},
		{"seed 004 gateway mode", "gateway", []string{"api.anthropic.com"}, withEgress(lifecycle.Config{}, "api.anthropic.com"), ""},
		{"full without the operator", "full", nil, lifecycle.Config{}, job.CodeNetworkDenied},
		{"full with the operator", "full", nil, lifecycle.Config{AllowHostNetwork: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &manifest.Task{Repository: manifest.Repository{URL: repo, Branch: "main"}, VM: manifest.VM{NetworkMode: tt.mode, AllowedHosts: tt.hosts}}
			if got := job.CodeOf(lifecycle.Admit(tt.cfg, tk)); got != tt.code {
				t.Errorf("Admit(%s %q) code = %q, want %q", tt.mode, tt.hosts, got, tt.code)
			}
		})
	}
}

// TestAdmitBoundSecretNeedsNetwork: a secret bound to hosts in a task
// without network was accepted and failed only after 203 s of retries.
func TestAdmitBoundSecretNeedsNetwork(t *testing.T) {
	repo := t.TempDir()
	f, err := secretfile.Parse([]byte("secrets:\n  ANTHROPIC_API_KEY: {env: TEST_KEY, hosts: [api.anthropic.com]}\n"), "secrets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := lifecycle.Config{Secrets: f, Env: func(string) string { return "a-long-enough-secret-value" }}
	tests := []struct {
		mode string
		cfg  lifecycle.Config
		want job.Code
	}{
		{"isolated", cfg, job.CodeInvalidRequest},
		{"outbound", withEgress(cfg, "api.anthropic.com"), ""},
	}
	for _, tt := range tests {
		tk := &manifest.Task{Repository: manifest.Repository{URL: repo, Branch: "main"},
			VM:      manifest.VM{NetworkMode: tt.mode, AllowedHosts: []string{"api.anthropic.com"}},
			Secrets: []manifest.Secret{{Name: "ANTHROPIC_API_KEY"}}}
		if tt.mode == "isolated" {
			tk.VM.AllowedHosts = nil
		}
		if got := job.CodeOf(lifecycle.Admit(tt.cfg, tk)); got != tt.want {
			t.Errorf("Admit(network %s, secret bound to a host) = %q, want %q", tt.mode, got, tt.want)
		}
	}
}
