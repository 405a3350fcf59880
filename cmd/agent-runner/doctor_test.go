package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// doctorReport is the documented JSON schema (docs/operations.md); decoding
// with DisallowUnknownFields keeps the two in step.
type doctorReport struct {
	SchemaVersion  int    `json:"schema_version"`
	OK             bool   `json:"ok"`
	DefaultBackend string `json:"default_backend"`
	Host           struct {
		Kernel   string `json:"kernel"`
		Arch     string `json:"arch"`
		UID      int    `json:"uid"`
		StoreDir string `json:"store_dir"`
	} `json:"host"`
	Checks []struct {
		Section string `json:"section"`
		Name    string `json:"name"`
		Status  string `json:"status"`
		Found   string `json:"found"`
		Fix     string `json:"fix"`
	} `json:"checks"`
	Backends []struct {
		Kind        string   `json:"kind"`
		Default     bool     `json:"default"`
		Isolating   bool     `json:"isolating"`
		Available   bool     `json:"available"`
		Error       string   `json:"error"`
		Status      string   `json:"status"`
		Enforced    []string `json:"enforced"`
		NotEnforced []struct {
			Limit string `json:"limit"`
			Why   string `json:"why"`
			Check string `json:"check"`
		} `json:"not_enforced"`
		Fix string `json:"fix"`
	} `json:"backends"`
}

// builtIn are the backends main.go links into the binary (this test
// process registers test backends of its own).
var builtIn = []string{"firecracker", "linux_sandbox", "local_process", "oci"}

func doctorJSON(t *testing.T, args ...string) (doctorReport, int) {
	t.Helper()
	out, stderr, code := cli(t, "", append([]string{"doctor", "--json"}, args...)...)
	var r doctorReport
	dec := json.NewDecoder(bytes.NewReader([]byte(out)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("doctor --json: %v (exit %d)\nstdout %s\nstderr %s", err, code, out, stderr)
	}
	return r, code
}

func TestDoctorJSON(t *testing.T) {
	store := filepath.Join(sandboxTempDir(t), "agent-runner-runs")
	r, code := doctorJSON(t, "--store-dir", store)
	if r.SchemaVersion != 1 || r.DefaultBackend != "linux_sandbox" || r.Host.StoreDir != store || r.Host.Kernel == "" {
		t.Errorf("report head = schema %d, default %q, host %+v", r.SchemaVersion, r.DefaultBackend, r.Host)
	}
	var failed []string
	names := map[string]string{}
	for _, c := range r.Checks {
		names[c.Name] = c.Status
		if c.Status == "fail" {
			failed = append(failed, c.Name)
		}
		if c.Status != "ok" && c.Status != "info" && c.Fix == "" {
			t.Errorf("check %s is %s without a fix", c.Name, c.Status)
		}
	}
	for _, name := range []string{"root", "max_user_namespaces", "landlock", "seccomp", "seccomp_kill_process", "i386_emulation",
		"cgroup_layout", "cgroup_create", "cgroup_memory", "cgroup_pids", "cgroup_cpu", "overlayfs", "overlayfs_userns", "loop_devices", "kvm",
		"runc", "runsc", "bwrap", "store_dir", "sandbox_tmpdir", "store_free_space", "sandbox_probe"} {
		if _, ok := names[name]; !ok {
			t.Errorf("no check %q in %v", name, names)
		}
	}
	if got := names["sandbox_tmpdir"]; got != "ok" {
		t.Errorf("sandbox_tmpdir = %q with the default TMPDIR, want ok", got)
	}
	var kinds []string
	for _, b := range r.Backends {
		kinds = append(kinds, b.Kind)
		if b.Status == "fail" {
			failed = append(failed, b.Kind)
		}
		if b.Default != (b.Kind == "linux_sandbox") {
			t.Errorf("backend %s default = %v", b.Kind, b.Default)
		}
	}
	if !slices.Equal(kinds, builtIn) {
		t.Errorf("backends = %v, want every kind built into the binary %v", kinds, builtIn)
	}
	// ok, the exit code and the failed checks tell one story.
	if r.OK != (code == 0) || r.OK != (len(failed) == 0) || (code != 0 && code != 1) {
		t.Errorf("ok = %v, exit %d, failed %v: want ok exactly when exit 0 and nothing failed", r.OK, code, failed)
	}
}

// The default store (./agent-runner-runs, serve's) in a directory others
// cannot search is fine now: linux_sandbox gets its directories as mounts.
func TestDoctorPrivateStoreParent(t *testing.T) {
	r, _ := doctorJSON(t)
	if !strings.HasSuffix(r.Host.StoreDir, "/agent-runner-runs") {
		t.Errorf("store_dir = %q, want the default ./agent-runner-runs", r.Host.StoreDir)
	}
	for _, c := range r.Checks {
		if c.Section == "store" && c.Status == "fail" {
			t.Errorf("store check %s = %s %q (fix %q) for a store under a private directory", c.Name, c.Status, c.Found, c.Fix)
		}
	}
}

func TestDoctorText(t *testing.T) {
	store := filepath.Join(sandboxTempDir(t), "agent-runner-runs")
	out, stderr, code := cli(t, "", "doctor", "--store-dir", store)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	wants := []string{"agent-runner doctor: kernel ", "\nuser namespaces\n", "\nkernel walls\n", "\ncgroups\n",
		"\nfilesystems and devices\n", "\nother runtimes\n", "\nstore\n", "\nsandbox\n", "\nbackends\n", "sandbox_tmpdir", "sandbox_probe"}
	for _, kind := range builtIn {
		wants = append(wants, "  "+kind+" (")
	}
	verdict := "\nOK: linux_sandbox can run jobs here"
	if code == 1 {
		verdict = "\nFAIL: linux_sandbox is not ready: "
	}
	for _, want := range append(wants, verdict) {
		if !strings.Contains(out, want) {
			t.Errorf("doctor text lacks %q:\n%s", want, out)
		}
	}
}
