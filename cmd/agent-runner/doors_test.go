package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoorsFailClosed: every door refuses to start on an isolating backend
// that cannot start (firecracker: always unavailable here) and on
// local_process without --unsafe-local-process; none falls back.
func TestDoorsFailClosed(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(manifest, []byte("name: m\ncapabilities: {tools: [list_logs], filesystem: {read: ["+dir+"]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		mentions []string
	}{
		{"serve default backend unavailable", []string{"serve", "--addr", "127.0.0.1:0", "--store-dir", dir, "--default-backend", "firecracker"},
			exitOperational, []string{"backend.unavailable", "--default-backend local_process --unsafe-local-process"}},
		{"serve local_process without the flag", []string{"serve", "--addr", "127.0.0.1:0", "--store-dir", dir, "--default-backend", "local_process"},
			exitInvalid, []string{"--unsafe-local-process"}},
		{"serve task backend unavailable", []string{"serve", "--addr", "127.0.0.1:0", "--store-dir", dir, "--workspace-root", dir, "--task-backend", "firecracker"},
			exitOperational, []string{"backend.unavailable", "--task-backend local_process --unsafe-local-process"}},
		{"serve task backend local_process without the flag", []string{"serve", "--addr", "127.0.0.1:0", "--store-dir", dir, "--workspace-root", dir, "--task-backend", "local_process"},
			exitInvalid, []string{"--unsafe-local-process"}},
		{"worker default backend unavailable", []string{"worker", "--nats", "nats://127.0.0.1:1", "--store-dir", dir, "--default-backend", "firecracker"},
			exitOperational, []string{"backend.unavailable"}},
		{"worker local_process without the flag", []string{"worker", "--nats", "nats://127.0.0.1:1", "--store-dir", dir, "--default-backend", "local_process"},
			exitInvalid, []string{"--unsafe-local-process"}},
		{"mcp backend unavailable", []string{"mcp", "--workspace-root", dir, "--store-dir", dir, "--backend", "firecracker"},
			exitOperational, []string{"backend.unavailable", "--backend local_process --unsafe-local-process"}},
		{"mcp local_process without the flag", []string{"mcp", "--workspace-root", dir, "--store-dir", dir, "--backend", "local_process"},
			exitInvalid, []string{"--unsafe-local-process"}},
		{"mcp --manifest local_process without the flag", []string{"mcp", "--manifest", manifest, "--runs-dir", dir, "--backend", "local_process"},
			exitInvalid, []string{"--unsafe-local-process"}},
		{"launch local_process without the flag", []string{"launch", "--manifest", manifest, "--task", manifest, "--runs-dir", dir, "--backend", "local_process"},
			exitInvalid, []string{"--unsafe-local-process"}},
		{"run-agent local_process without the flag", []string{"run-agent", "--manifest", manifest, "--message", "hi", "--runs-dir", dir, "--backend", "local_process"},
			exitInvalid, []string{"--unsafe-local-process"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := cli(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("%v: exit %d, want %d\n%s", tt.args, code, tt.code, stderr)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(stderr, m) {
					t.Errorf("%v: stderr %q does not mention %q", tt.args, stderr, m)
				}
			}
		})
	}
}

// TestServeRefusesUnenabledLocalProcess: a request naming local_process on
// a serve the operator did not give --unsafe-local-process is refused
// (422 validation.invalid_request), not run unisolated.
func TestServeRefusesUnenabledLocalProcess(t *testing.T) {
	addr, ws := freeAddr(t), t.TempDir()
	startServe(t, addr, "--store-dir", t.TempDir(), "--workspace-root", ws)
	req := requestFile(t, `{"workspace":{"path":"`+ws+`"},"command":{"argv":["true"]},"policy":{"allowed_commands":["true"]},"backend":{"kind":"local_process"}}`)
	_, stderr, code := cli(t, "", "submit", "--server=http://"+addr, "--request", req)
	if code != exitInvalid || !strings.Contains(stderr, "validation.invalid_request") || !strings.Contains(stderr, "local_process is not enabled") {
		t.Errorf("submit naming local_process = exit %d %q, want %d validation.invalid_request", code, stderr, exitInvalid)
	}
}

// sandboxTempDir is t.TempDir() made searchable by linux_sandbox's
// unprivileged uid, for a run store whose snapshots jobs run from (the
// default backend of run, serve, worker and mcp is linux_sandbox).
func sandboxTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
