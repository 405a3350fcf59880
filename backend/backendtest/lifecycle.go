package backendtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Lifecycle runs the sandbox lifecycle suite (backend.Sandboxes): create,
// execs sharing a workspace, stdio, env and cwd, exit codes, timeouts,
// pause and resume, file reads and writes, delete; started processes
// (process.go): wait, signal, cancel, stdin, terminals, two at once, a
// paused one, one ended by delete. Each test creates its
// own sandbox on a fresh backend from newBackend; a backend that does not
// implement backend.Sandboxes fails it.
func Lifecycle(t *testing.T, newBackend Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, backend.Sandbox, backend.Spec)
	}{
		{"ExecsShareWorkspace", execsShare},
		{"EnvCwdStdio", envCwdStdio},
		{"ExitCode", lifeExitCode},
		{"MissingProgram", lifeMissing},
		{"TimeoutKillsGroup", lifeTimeout},
		{"PauseResume", pauseResume},
		{"ReadFileRefusesSymlink", readRefusesLink},
		{"WriteFileThenExec", writeThenExec},
		{"DeleteEndsEverything", deleteEnds},
		{"StartWaitSignal", startWaitSignal},
		{"WaitCanceledStopsTheProcess", waitCanceled},
		{"CloseStdin", closeStdin},
		{"Terminal", terminal},
		{"StartWhilePausedHonoursCtx", startWhilePaused},
		{"ConcurrentProcesses", concurrentProcesses},
		{"PausedProcessMakesNoProgress", pausedProcess},
		{"DeleteEndsStartedProcesses", deleteEndsProcesses},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, spec := create(t, newBackend(t))
			tt.fn(t, sb, spec)
		})
	}
	t.Run("NoGoroutineLeak", func(t *testing.T) {
		b := newBackend(t)
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		sb, _ := create(t, b)
		lifeExec(t, sb, backend.Exec{Argv: []string{"/bin/sh", "-c", "echo x; sleep 0.05 >/dev/null &"}})
		if err := sb.Delete(context.Background()); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	})
}

// create makes a sandbox of b on a fresh Spec workspace; it is deleted
// when t ends.
func create(t *testing.T, b backend.Backend) (backend.Sandbox, backend.Spec) {
	t.Helper()
	sbs, ok := b.(backend.Sandboxes)
	if !ok {
		t.Fatalf("backend %s does not implement backend.Sandboxes", b.Kind())
	}
	spec, _, _ := Spec(t)
	spec.Argv, spec.Stdout, spec.Stderr = nil, nil, nil
	sb, err := sbs.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("%s.Create: %v", b.Kind(), err)
	}
	t.Cleanup(func() {
		if err := sb.Delete(context.Background()); err != nil {
			t.Errorf("Delete at cleanup: %v", err)
		}
	})
	return sb, spec
}

// lifeExec runs e, failing t on an error, and returns its outcome and
// output.
func lifeExec(t *testing.T, sb backend.Sandbox, e backend.Exec) (backend.Outcome, string, string) {
	t.Helper()
	out, errb := &Buffer{}, &Buffer{}
	e.Stdout, e.Stderr = out, errb
	if e.Env == nil {
		e.Env = []string{"PATH=/usr/bin:/bin"}
	}
	o, err := sb.Exec(context.Background(), e)
	if err != nil {
		t.Fatalf("Exec(%q): %v", e.Argv, err)
	}
	return o, out.String(), errb.String()
}

func sh(script string) backend.Exec {
	return backend.Exec{Argv: []string{"/bin/sh", "-c", script}}
}

func execsShare(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	o, _, _ := lifeExec(t, sb, sh("echo first > made.txt"))
	wantExit(t, o, 0)
	o, out, _ := lifeExec(t, sb, backend.Exec{Argv: []string{"/bin/cat", "made.txt", "input.txt"}})
	wantExit(t, o, 0)
	if diff := cmp.Diff("first\ninput\n", out); diff != "" {
		t.Errorf("second exec's cat output (-want +got):\n%s", diff)
	}
}

func envCwdStdio(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	e := sh(`echo "$ONE:$CONFORMANCE"; basename "$(pwd)"; cat; echo to-err >&2`)
	e.Env = []string{"PATH=/usr/bin:/bin", "ONE=1"}
	e.Cwd = "sub"
	e.Stdin = strings.NewReader("from-stdin\n")
	o, out, errb := lifeExec(t, sb, e)
	wantExit(t, o, 0)
	got := []string{out, errb}
	want := []string{"1:\nsub\nfrom-stdin\n", "to-err\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stdout, stderr (-want +got):\n%s", diff)
	}
	e = backend.Exec{Argv: []string{"/bin/true"}, Cwd: "../.."}
	if _, err := sb.Exec(context.Background(), e); err == nil {
		t.Errorf("Exec with cwd %q = nil error, want one", e.Cwd)
	}
}

func lifeExitCode(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	o, _, _ := lifeExec(t, sb, sh("exit 3"))
	wantExit(t, o, 3)
	o, _, _ = lifeExec(t, sb, sh("kill -KILL $$"))
	if o.Signal != "SIGKILL" || o.Reason != job.ReasonSignal || o.ExitCode != nil {
		t.Errorf("self-killed exec = exit %v signal %q reason %q, want SIGKILL, signal", deref(o.ExitCode), o.Signal, o.Reason)
	}
	// The sandbox outlives a failing exec.
	o, _, _ = lifeExec(t, sb, backend.Exec{Argv: []string{"/bin/true"}})
	wantExit(t, o, 0)
}

func lifeMissing(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	_, err := sb.Exec(context.Background(), backend.Exec{Argv: []string{"/no/such/program"}})
	if got, want := job.CodeOf(err), job.CodeRunSpawnFailed; got != want {
		t.Errorf("Exec of a missing program: error %v, want code %s", err, want)
	}
	o, _, _ := lifeExec(t, sb, backend.Exec{Argv: []string{"/bin/true"}})
	wantExit(t, o, 0)
}

func lifeTimeout(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	e := sh("sleep 60 >/dev/null 2>&1 & echo $! > bg.pid; wait")
	e.Timeout, e.KillGrace = 300*time.Millisecond, 300*time.Millisecond
	start := time.Now()
	o, _, _ := lifeExec(t, sb, e)
	if o.Reason != job.ReasonTimeout {
		t.Errorf("Exec reason = %q, want %q", o.Reason, job.ReasonTimeout)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Exec with a 300ms timeout took %v", d)
	}
	// The background sleep was in the exec's group: it died too.
	waitFor(t, "the timed-out exec's background sleep to die", func() bool {
		_, out, _ := lifeExec(t, sb, sh(`kill -0 "$(cat bg.pid)" 2>/dev/null && echo alive || echo dead`))
		return out == "dead\n"
	})
}

// counter is a background loop that writes a growing number to count.
const counter = `(i=0; while :; do i=$((i+1)); echo $i > count.tmp; mv count.tmp count; sleep 0.02; done) >/dev/null 2>&1 </dev/null &`

// readCount reads the counter through the sandbox (0 when not there yet).
func readCount(t *testing.T, sb backend.Sandbox) int {
	t.Helper()
	var b Buffer
	if err := sb.ReadFile(context.Background(), "count", &b, 64); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		t.Fatalf("ReadFile(count): %v", err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(b.String()))
	return n
}

func pauseResume(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	ctx := context.Background()
	o, _, _ := lifeExec(t, sb, sh(counter))
	wantExit(t, o, 0)
	counterPauses(t, sb, func() {})
	if err := sb.Resume(ctx); err != nil {
		t.Errorf("Resume of a running sandbox: %v", err)
	}
}

func readRefusesLink(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	ctx := context.Background()
	o, _, _ := lifeExec(t, sb, sh("ln -s /etc/passwd link && ln -s / rootlink && mkfifo fifo"))
	wantExit(t, o, 0)
	for _, rel := range []string{"link", "rootlink/etc/passwd", "../ws/input.txt", "/etc/passwd"} {
		var b Buffer
		err := sb.ReadFile(ctx, rel, &b, 1<<20)
		if got, want := job.CodeOf(err), job.CodePathEscape; got != want {
			t.Errorf("ReadFile(%q) error %v, want code %s", rel, err, want)
		}
		if b.String() != "" {
			t.Errorf("ReadFile(%q) wrote %q", rel, b.String())
		}
	}
	var b Buffer
	if err := sb.ReadFile(ctx, "fifo", &b, 1<<20); err == nil {
		t.Errorf("ReadFile(fifo) = nil error, want a refusal")
	}
	if err := sb.ReadFile(ctx, "input.txt", &b, 3); err == nil {
		t.Errorf("ReadFile(input.txt, limit 3) = nil error, want too large")
	}
	b = Buffer{}
	if err := sb.ReadFile(ctx, "input.txt", &b, 1<<20); err != nil || b.String() != "input\n" {
		t.Errorf("ReadFile(input.txt) = %q, %v; want %q", b.String(), err, "input\n")
	}
}

func writeThenExec(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "sub/given.txt", strings.NewReader("given\n"), 0o640); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	o, out, errb := lifeExec(t, sb, sh(`cat sub/given.txt; stat -c %a sub/given.txt; echo more >> sub/given.txt && cat sub/given.txt`))
	wantExit(t, o, 0)
	if diff := cmp.Diff("given\n640\ngiven\nmore\n", out); diff != "" {
		t.Errorf("exec reading the written file (-want +got):\n%s\nstderr %q", diff, errb)
	}
	// Replacing a file: a symlink the workload left is replaced, never
	// written through, and a path through a symlinked directory is refused.
	lifeExec(t, sb, sh("ln -s /tmp/target swapped && ln -s /tmp linkdir"))
	if err := sb.WriteFile(ctx, "swapped", strings.NewReader("new\n"), 0o644); err != nil {
		t.Fatalf("WriteFile over a symlink: %v", err)
	}
	o, out, _ = lifeExec(t, sb, sh(`test -L swapped && echo link; cat swapped; test -e /tmp/target && echo target; true`))
	wantExit(t, o, 0)
	if out != "new\n" {
		t.Errorf("after WriteFile over a symlink the workload sees %q, want %q", out, "new\n")
	}
	err := sb.WriteFile(ctx, "linkdir/evil", strings.NewReader("x"), 0o644)
	if got, want := job.CodeOf(err), job.CodePathEscape; got != want {
		t.Errorf("WriteFile(linkdir/evil) error %v, want code %s", err, want)
	}
}

func deleteEnds(t *testing.T, sb backend.Sandbox, spec backend.Spec) {
	ctx := context.Background()
	lifeExec(t, sb, sh(counter))
	waitFor(t, "the counter to reach 3", func() bool { return readCount(t, sb) >= 3 })
	if err := sb.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	_, err := sb.Exec(ctx, backend.Exec{Argv: []string{"/bin/true"}})
	if got, want := job.CodeOf(err), job.CodeJobNotFound; got != want {
		t.Errorf("Exec after Delete: error %v, want code %s", err, want)
	}
	var b Buffer
	if err := sb.ReadFile(ctx, "input.txt", &b, 64); err == nil {
		t.Errorf("ReadFile after Delete = nil error, want one")
	}
	// The Spec's workspace stays; nothing writes to it any more.
	host := hostCount(spec)
	time.Sleep(200 * time.Millisecond)
	if got := hostCount(spec); got != host {
		t.Errorf("the counter went from %d to %d after Delete", host, got)
	}
}

// hostCount reads the counter from the Spec's workspace on the host.
func hostCount(spec backend.Spec) int {
	b, _ := os.ReadFile(filepath.Join(spec.Workspace.Dir, "count"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// counterPauses checks that a counter a process of sb keeps in the file
// count makes no progress while sb is paused and grows again after
// Resume. A backend that cannot pause skips the test (after stop, which
// ends what the caller started).
func counterPauses(t *testing.T, sb backend.Sandbox, stop func()) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the counter to reach 3", func() bool { return readCount(t, sb) >= 3 })
	if err := sb.Pause(ctx); err != nil {
		stop()
		if job.CodeOf(err) == job.CodeBackendUnavail {
			t.Skipf("Pause: %v", err)
		}
		t.Fatalf("Pause: %v", err)
	}
	paused := readCount(t, sb)
	time.Sleep(300 * time.Millisecond)
	if got := readCount(t, sb); got != paused {
		t.Errorf("the counter went from %d to %d while paused", paused, got)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	waitFor(t, "the counter to grow after Resume", func() bool { return readCount(t, sb) > paused+2 })
}
