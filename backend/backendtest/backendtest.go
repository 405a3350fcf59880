// Package backendtest is the conformance suite every backend runs: the same
// specs, the same expectations, whatever the isolation mechanism, and the
// adversarial suite every isolating backend runs (Adversarial). Both take
// a Factory and build a fresh instance for each test, the way a process
// builds its backends from their registered factories. A backend package
// calls them from its tests:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.New(mybackend.Kind, backend.Config{}))
//	}
//
// The suite uses only programs from the host toolchain (/bin/sh, /bin/echo,
// /bin/sleep, ...) and writes only inside the workspaces it creates.
package backendtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Buffer is a concurrency-safe output sink.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Spec returns a spec that runs argv in a fresh workspace with a short
// timeout, and the buffers its output goes to.
func Spec(t testing.TB, argv ...string) (backend.Spec, *Buffer, *Buffer) {
	t.Helper()
	dir := t.TempDir()
	// Sandboxing backends run as an unprivileged host uid: make the path
	// to the workspace searchable (t.TempDir's parent is 0700).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "input.txt"), []byte("input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errb := &Buffer{}, &Buffer{}
	return backend.Spec{
		JobID:     "job_conformance",
		Argv:      argv,
		Env:       []string{"PATH=/usr/bin:/bin", "CONFORMANCE=yes"},
		Workspace: backend.Workspace{Dir: ws},
		Cwd:       ".",
		Network:   job.NetworkDisabled,
		Limits:    backend.Limits{Timeout: 20 * time.Second, KillGrace: 500 * time.Millisecond, MemoryBytes: 256 << 20, MaxProcesses: 64, TmpBytes: 16 << 20},
		Stdout:    out,
		Stderr:    errb,
	}, out, errb
}

// Factory returns a backend ready to run, or skips t with the reason it
// cannot run here.
type Factory func(t *testing.T) backend.Backend

// New is the Factory that builds kind from its registered factory with
// cfg (backend.New), failing the test when the factory refuses cfg and
// skipping it when the backend is unavailable on this host. The host is
// probed once, by the first instance; later ones run without a probe of
// their own.
func New(kind string, cfg backend.Config) Factory {
	var probe sync.Once
	var unavailable error
	return func(t *testing.T) backend.Backend {
		t.Helper()
		b, err := backend.New(kind, cfg)
		if err != nil {
			t.Fatalf("backend.New(%q): %v", kind, err)
		}
		probe.Do(func() { unavailable = b.Available(context.Background()) })
		if unavailable != nil {
			t.Skipf("backend %s is unavailable here: %v", kind, unavailable)
		}
		return b
	}
}

// Run runs the conformance suite, each test on a fresh backend from
// newBackend.
func Run(t *testing.T, newBackend Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, backend.Backend)
	}{
		{"ExitZero", exitZero},
		{"ExitCode", exitCode},
		{"StdoutStderrSeparate", stdoutStderr},
		{"ArgvNotShellParsed", argvLiteral},
		{"EnvIsExactlySpec", envExact},
		{"CwdInsideWorkspace", cwdInside},
		{"WritesLandInWorkspace", writesLand},
		{"TimeoutKillsTree", timeoutKillsTree},
		{"CancelKillsTree", cancelKillsTree},
		{"KilledBySignal", killedBySignal},
		{"MissingProgram", missingProgram},
		{"LargeOutput", largeOutput},
		{"StdinIsEmpty", stdinEmpty},
		{"StdinReaderIsPiped", stdinReader},
		{"OpenStdinDoesNotHoldRun", stdinStaysOpen},
		{"NoControllingTerminal", noControllingTerminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newBackend(t)) })
	}
}

func run(t *testing.T, b backend.Backend, spec backend.Spec) backend.Outcome {
	t.Helper()
	out, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("%s.Run(%q) error: %v", b.Kind(), spec.Argv, err)
	}
	return out
}

func wantExit(t *testing.T, out backend.Outcome, code int) {
	t.Helper()
	if out.ExitCode == nil || *out.ExitCode != code || out.Reason != job.ReasonExit {
		t.Fatalf("outcome = exit %v reason %q signal %q, want exit %d reason exit", deref(out.ExitCode), out.Reason, out.Signal, code)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func exitZero(t *testing.T, b backend.Backend) {
	spec, _, _ := Spec(t, "/bin/true")
	wantExit(t, run(t, b, spec), 0)
}

func exitCode(t *testing.T, b backend.Backend) {
	spec, _, _ := Spec(t, "/bin/sh", "-c", "exit 7")
	wantExit(t, run(t, b, spec), 7)
}

func stdoutStderr(t *testing.T, b backend.Backend) {
	spec, out, errb := Spec(t, "/bin/sh", "-c", "echo to-out; echo to-err >&2")
	wantExit(t, run(t, b, spec), 0)
	if out.String() != "to-out\n" || errb.String() != "to-err\n" {
		t.Errorf("stdout = %q, stderr = %q; want %q, %q", out.String(), errb.String(), "to-out\n", "to-err\n")
	}
}

func argvLiteral(t *testing.T, b backend.Backend) {
	spec, out, _ := Spec(t, "/bin/echo", "$HOME", "a b", "*", "`id`")
	wantExit(t, run(t, b, spec), 0)
	if got, want := out.String(), "$HOME a b * `id`\n"; got != want {
		t.Errorf("echo output = %q, want %q (argv must not be shell-expanded)", got, want)
	}
}

func envExact(t *testing.T, b backend.Backend) {
	spec, out, _ := Spec(t, "/usr/bin/env")
	wantExit(t, run(t, b, spec), 0)
	got := strings.Fields(out.String())
	for _, kv := range got {
		if !strings.HasPrefix(kv, "PATH=") && kv != "CONFORMANCE=yes" && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PWD=") {
			t.Errorf("child environment has %q, which the spec did not give", kv)
		}
	}
	if !strings.Contains(out.String(), "CONFORMANCE=yes") {
		t.Errorf("child environment %q lacks CONFORMANCE=yes", got)
	}
}

func cwdInside(t *testing.T, b backend.Backend) {
	spec, out, _ := Spec(t, "/bin/cat", "../input.txt")
	spec.Cwd = "sub"
	wantExit(t, run(t, b, spec), 0)
	if out.String() != "input\n" {
		t.Errorf("cat ../input.txt from sub = %q, want the workspace file", out.String())
	}
}

func writesLand(t *testing.T, b backend.Backend) {
	spec, _, _ := Spec(t, "/bin/sh", "-c", "echo made > sub/made.txt")
	wantExit(t, run(t, b, spec), 0)
	if spec.Workspace.Overlay() {
		return
	}
	got, err := os.ReadFile(filepath.Join(spec.Workspace.Dir, "sub", "made.txt"))
	if err != nil || string(got) != "made\n" {
		t.Errorf("workspace file = %q, %v; want %q", got, err, "made\n")
	}
}

// leftover reports whether a process whose command line contains marker is
// still alive on the host.
func leftover(marker string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			return true
		}
	}
	return false
}

// waitGone polls until no process with marker remains or the deadline
// passes; it is a correctness wait, not a timing assertion.
func waitGone(marker string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !leftover(marker) {
			return true
		}
	}
	return false
}

// forkingArgv starts two long sleeps in the background, marked in their
// argv so the test can find survivors, and ignores SIGTERM in the parent.
func forkingArgv(marker string) []string {
	script := "trap '' TERM; (exec -a sleeper" + marker + " sleep 1000) & (exec -a sleeper" + marker + " sleep 1001) & wait"
	return []string{"/bin/bash", "-c", script}
}

func cancelKillsTree(t *testing.T, b backend.Backend) {
	marker := "." + strings.ReplaceAll(t.Name(), "/", "")
	spec, _, _ := Spec(t, forkingArgv(marker)...)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	out, err := b.Run(ctx, spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.Reason != job.ReasonCanceled {
		t.Errorf("reason = %q, want canceled", out.Reason)
	}
	if !waitGone(marker) {
		t.Errorf("processes with %q survived cancellation", marker)
	}
}

func killedBySignal(t *testing.T, b backend.Backend) {
	spec, _, _ := Spec(t, "/bin/sh", "-c", "kill -KILL $$")
	out := run(t, b, spec)
	if out.Reason != job.ReasonSignal || out.Signal != "SIGKILL" || out.ExitCode != nil {
		t.Errorf("outcome = reason %q signal %q exit %v, want signal SIGKILL and no exit code", out.Reason, out.Signal, deref(out.ExitCode))
	}
}

func missingProgram(t *testing.T, b backend.Backend) {
	spec, _, _ := Spec(t, "/nonexistent/program")
	out, err := b.Run(context.Background(), spec)
	if err == nil {
		if out.ExitCode == nil || *out.ExitCode == 0 {
			t.Fatalf("running a missing program = %+v, want an error or a non-zero exit", out)
		}
		return
	}
	if c := job.CodeOf(err); c != job.CodeRunSpawnFailed {
		t.Errorf("error code = %q, want %q", c, job.CodeRunSpawnFailed)
	}
}

func largeOutput(t *testing.T, b backend.Backend) {
	spec, out, _ := Spec(t, "/usr/bin/head", "-c", "5000000", "/dev/zero")
	wantExit(t, run(t, b, spec), 0)
	if n := len(out.String()); n != 5000000 {
		t.Errorf("received %d bytes, want 5000000", n)
	}
}

func stdinEmpty(t *testing.T, b backend.Backend) {
	spec, out, _ := Spec(t, "/usr/bin/wc", "-c")
	wantExit(t, run(t, b, spec), 0)
	if strings.TrimSpace(out.String()) != "0" {
		t.Errorf("wc -c of stdin = %q, want 0", out.String())
	}
}

func stdinReader(t *testing.T, b backend.Backend) {
	spec, out, _ := Spec(t, "/usr/bin/wc", "-c")
	spec.Stdin = strings.NewReader("12345")
	wantExit(t, run(t, b, spec), 0)
	if strings.TrimSpace(out.String()) != "5" {
		t.Errorf("wc -c of a 5-byte stdin = %q", out.String())
	}
}

// stdinStaysOpen: a process that ignores its stdin ends while the reader
// behind it never reaches EOF (an interactive terminal); Run returns.
func stdinStaysOpen(t *testing.T, b backend.Backend) {
	spec, _, _ := Spec(t, "/bin/true")
	pr, pw := io.Pipe()
	defer pw.Close()
	spec.Stdin = pr
	done := make(chan backend.Outcome, 1)
	go func() { done <- run(t, b, spec) }()
	select {
	case out := <-done:
		wantExit(t, out, 0)
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after the process exited: it waits for a stdin that never ends")
	}
}

func timeoutKillsTree(t *testing.T, b backend.Backend) {
	marker := "." + strings.ReplaceAll(t.Name(), "/", "")
	spec, _, _ := Spec(t, forkingArgv(marker)...)
	spec.Limits.Timeout = 300 * time.Millisecond
	out := run(t, b, spec)
	if out.Reason != job.ReasonTimeout {
		t.Errorf("reason = %q, want timeout", out.Reason)
	}
	if !waitGone(marker) {
		t.Errorf("processes with %q survived the timeout", marker)
	}
}
