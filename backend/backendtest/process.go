package backendtest

import (
	"context"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// The process part of the lifecycle suite: Start and the Process it
// returns (Wait, Signal, Resize, CloseStdin), terminals, processes side
// by side, a paused process, and Delete ending started processes.

// start starts e in sb with PATH set and output into the returned
// buffers, failing t on an error.
func start(t *testing.T, sb backend.Sandbox, e backend.Exec) (backend.Process, *Buffer, *Buffer) {
	t.Helper()
	out, errb := &Buffer{}, &Buffer{}
	e.Stdout, e.Stderr = out, errb
	if e.Env == nil {
		e.Env = []string{"PATH=/usr/bin:/bin"}
	}
	p, err := sb.Start(context.Background(), e)
	if err != nil {
		t.Fatalf("Start(%q): %v", e.Argv, err)
	}
	return p, out, errb
}

// wait waits for p, failing t on an error.
func wait(t *testing.T, p backend.Process) backend.Outcome {
	t.Helper()
	o, err := p.Wait(context.Background())
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return o
}

// waitOutput waits until b holds want.
func waitOutput(t *testing.T, b *Buffer, want string) {
	t.Helper()
	waitFor(t, "output "+want, func() bool { return strings.Contains(b.String(), want) })
}

func startWaitSignal(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	p, out, _ := start(t, sb, sh(`trap 'echo got-term; exit 5' TERM; echo ready; while :; do sleep 0.05; done`))
	if p.ID() <= 0 {
		t.Errorf("Process.ID() = %d, want a pid", p.ID())
	}
	waitOutput(t, out, "ready\n")
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(TERM): %v", err)
	}
	o := wait(t, p)
	wantExit(t, o, 5)
	if got, want := out.String(), "ready\ngot-term\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	// Wait again: the same outcome; a signal now does nothing.
	if again := wait(t, p); again.ExitCode == nil || *again.ExitCode != 5 {
		t.Errorf("second Wait = %+v, want exit 5 again", again)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("Signal after the exit: %v", err)
	}
	if err := p.Resize(80, 24); job.CodeOf(err) != job.CodeRunSpawnFailed {
		t.Errorf("Resize of a process without a terminal: error %v, want code %s", err, job.CodeRunSpawnFailed)
	}
}

func waitCanceled(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	e := sh(`trap 'exit 9' TERM; echo ready; while :; do sleep 0.05; done`)
	p, out, _ := start(t, sb, e)
	waitOutput(t, out, "ready\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, err := p.Wait(ctx)
	if err != nil || o.Reason != job.ReasonCanceled || o.ExitCode == nil || *o.ExitCode != 9 {
		t.Errorf("Wait(canceled ctx) = exit %v reason %q, %v; want exit 9 (its TERM trap), canceled", deref(o.ExitCode), o.Reason, err)
	}
}

func closeStdin(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	r, w := io.Pipe()
	defer w.Close()
	e := sh(`cat; echo cat-done`)
	e.Stdin = r
	p, out, _ := start(t, sb, e)
	if _, err := io.WriteString(w, "typed\n"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, "typed\n")
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	wantExit(t, wait(t, p), 0)
	if got, want := out.String(), "typed\ncat-done\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

func terminal(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	r, w := io.Pipe()
	defer w.Close()
	e := sh(`test -t 0 && test -t 1 && test -t 2 && echo tty-yes; echo "term=$TERM"; echo "name=$(tty)"; echo "devtty=$(stty size < /dev/tty 2>&1)"; stty size; read line; stty size; echo "line=$line"`)
	e.Stdin, e.Terminal = r, &backend.Terminal{Cols: 100, Rows: 30, Term: "xterm-conformance"}
	p, out, _ := start(t, sb, e)
	waitOutput(t, out, "30 100")
	if err := p.Resize(120, 40); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	if _, err := io.WriteString(w, "hello\n"); err != nil {
		t.Fatal(err)
	}
	wantExit(t, wait(t, p), 0)
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	// ttyname finds it: the terminal is where the process looks; and
	// /dev/tty, opened inside, answers the terminal's ioctls (job control
	// in an interactive shell needs them).
	for _, want := range []string{"tty-yes\n", "term=xterm-conformance\n", "name=/dev/pts/", "30 100\n", "devtty=30 100\n", "40 120\n", "line=hello\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output %q lacks %q", got, want)
		}
	}
	// End of input on a terminal is the EOF character: cat ends.
	e = backend.Exec{Argv: []string{"/bin/cat"}, Terminal: &backend.Terminal{}}
	p, _, _ = start(t, sb, e)
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin on a terminal: %v", err)
	}
	wantExit(t, wait(t, p), 0)
}

func startWhilePaused(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	if err := sb.Pause(context.Background()); err != nil {
		if job.CodeOf(err) == job.CodeBackendUnavail {
			t.Skipf("Pause: %v", err)
		}
		t.Fatalf("Pause: %v", err)
	}
	// Start waits for the sandbox to be resumed; only the cancel ends it.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	p, err := sb.Start(ctx, sh(`echo ran`))
	if got, want := job.CodeOf(err), job.CodeRunCanceled; got != want {
		t.Errorf("Start in a paused sandbox, canceled: %v (process %v), want code %s", err, p, want)
	}
	if err := sb.Resume(context.Background()); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	o, out, _ := lifeExec(t, sb, sh(`echo after`))
	wantExit(t, o, 0)
	if out != "after\n" {
		t.Errorf("exec after Resume printed %q, want %q", out, "after\n")
	}
}

func concurrentProcesses(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	// Each waits for the other's file: both end only if both run at once.
	a, _, _ := start(t, sb, sh(`touch a.up; while [ ! -e b.up ]; do sleep 0.02; done`))
	b, _, _ := start(t, sb, sh(`touch b.up; while [ ! -e a.up ]; do sleep 0.02; done`))
	if a.ID() == b.ID() {
		t.Errorf("two processes share the id %d", a.ID())
	}
	wantExit(t, wait(t, a), 0)
	wantExit(t, wait(t, b), 0)
}

func pausedProcess(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	p, _, _ := start(t, sb, sh(`i=0; while :; do i=$((i+1)); echo $i > count.tmp; mv count.tmp count; sleep 0.02; done`))
	counterPauses(t, sb, func() { p.Signal(syscall.SIGKILL) })
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Signal(KILL): %v", err)
	}
	if o := wait(t, p); o.Signal != "SIGKILL" || o.Reason != job.ReasonSignal {
		t.Errorf("killed process = signal %q reason %q, want SIGKILL, signal", o.Signal, o.Reason)
	}
}

func deleteEndsProcesses(t *testing.T, sb backend.Sandbox, _ backend.Spec) {
	p, out, _ := start(t, sb, sh(`echo ready; exec sleep 60`))
	waitOutput(t, out, "ready\n")
	waited := make(chan backend.Outcome, 1)
	go func() {
		o, _ := p.Wait(context.Background())
		waited <- o
	}()
	if err := sb.Delete(context.Background()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	o := <-waited
	if o.ExitCode != nil || o.Signal != "SIGKILL" {
		t.Errorf("process at Delete = exit %v signal %q, want SIGKILL", deref(o.ExitCode), o.Signal)
	}
	if _, err := sb.Start(context.Background(), backend.Exec{Argv: []string{"/bin/true"}}); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("Start after Delete: error %v, want code %s", err, job.CodeJobNotFound)
	}
}
