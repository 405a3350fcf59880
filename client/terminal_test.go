package client_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// screen reads a terminal's output in the background; waitFor blocks
// until what it showed since the last wait holds a string.
type screen struct {
	t    *testing.T
	seen chan []byte
	buf  bytes.Buffer
	eof  chan struct{}
}

func watch(t *testing.T, r io.Reader) *screen {
	s := &screen{t: t, seen: make(chan []byte, 64), eof: make(chan struct{})}
	go func() {
		defer close(s.eof)
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			if n > 0 {
				s.seen <- append([]byte(nil), b[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *screen) waitFor(ctx context.Context, want string) {
	s.t.Helper()
	for !strings.Contains(s.buf.String(), want) {
		select {
		case b := <-s.seen:
			s.buf.Write(b)
		case <-s.eof:
			s.t.Fatalf("waiting for %q, the output ended: %q", want, s.buf.String())
		case <-ctx.Done():
			s.t.Fatalf("waiting for %q, the terminal showed %q", want, s.buf.String())
		}
	}
	s.buf.Reset()
}

// TestTerminal: a shell on a pty through the client's terminal over the
// sessions door: its size, a resize, Ctrl-C reaching the foreground
// process, and its exit code.
func TestTerminal(t *testing.T) {
	c := sessionServer(t)
	// Bounds the test, so that a shell that never answers fails it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "tty"}); err != nil {
		t.Fatal(err)
	}
	term, err := c.OpenTerminal(ctx, "tty", client.ProcessRequest{Argv: []string{"sh"}}, client.PtySize{Cols: 90, Rows: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	out := watch(t, term)
	term.Write([]byte("stty size\n"))
	out.waitFor(ctx, "20 90")
	if err := term.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("stty size\n"))
	out.waitFor(ctx, "30 100")
	// The foreground process says it is armed as it becomes sleep; only
	// an interrupt that reaches it ends it with 130.
	term.Write([]byte("sh -c 'echo arm''ed; exec sleep 3600'\n"))
	out.waitFor(ctx, "armed")
	term.Write([]byte{0x03})
	term.Write([]byte("echo back-$?\n"))
	out.waitFor(ctx, "back-130")
	term.Write([]byte("exit 3\n"))
	if code, err := term.Wait(); code != 3 || err != nil {
		t.Errorf("Wait() = %d, %v, want 3", code, err)
	}
}

// TestTerminalKilled: a process killed through the API ends its
// terminal with run.canceled, not an exit code; an unknown pid is the
// server's job.not_found.
func TestTerminalKilled(t *testing.T) {
	c := sessionServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "k"}); err != nil {
		t.Fatal(err)
	}
	term, err := c.OpenTerminal(ctx, "k", client.ProcessRequest{Argv: []string{"sleep", "3600"}}, client.PtySize{})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, term)
	if _, err := c.KillProcess(ctx, "k", term.PID); err != nil {
		t.Fatal(err)
	}
	code, err := term.Wait()
	assertCode(t, "Wait(killed)", err, job.CodeRunCanceled)
	if code != -1 {
		t.Errorf("Wait(killed) = %d, want -1", code)
	}
	_, err = c.AttachProcess(ctx, "k", 999999, client.AttachOptions{})
	assertCode(t, "AttachProcess(unknown pid)", err, job.CodeJobNotFound)
}

// TestProcessCalls: a background process started, listed, fed on stdin,
// read from an offset over SSE, signalled and killed.
func TestProcessCalls(t *testing.T) {
	c := sessionServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProcess(ctx, "p", client.ProcessRequest{Argv: []string{"sh", "-c", "echo one; read x; echo err-$x >&2; read y; echo two-$y; exec sleep 3600"}, Tag: "worker"})
	if err != nil || p.State != "running" || p.Tag != "worker" || p.PID == 0 {
		t.Fatalf("StartProcess = %+v, %v", p, err)
	}
	// From the start: the process's record, then its output; it reads
	// a line once it said one, and another once it said err (so its
	// stdout and stderr come in this order).
	var got []string
	stop := context.Canceled
	follow := func(from int64, answer bool) error {
		got = nil
		return c.FollowProcess(ctx, "p", p.PID, from, func(ev client.ProcessEvent) error {
			got = append(got, ev.Type+":"+string(ev.Data))
			if answer && (strings.Contains(string(ev.Data), "one") || strings.Contains(string(ev.Data), "err")) {
				if err := c.WriteProcessStdin(ctx, "p", p.PID, []byte("hi\n"), false); err != nil {
					return err
				}
			}
			if strings.Contains(string(ev.Data), "two") {
				return stop
			}
			return nil
		})
	}
	if err := follow(0, true); err != stop || len(got) < 2 || got[0] != "start:" || got[1] != "stdout:one\n" {
		t.Fatalf("FollowProcess(0) = %v, events %q", err, got)
	}
	// From offset 4 ("one\n" read): only the rest, by stream.
	if err := follow(4, false); err != stop {
		t.Fatalf("FollowProcess(4) = %v", err)
	}
	if diff := cmp.Diff([]string{"stderr:err-hi\n", "stdout:two-hi\n"}, got); diff != "" {
		t.Errorf("events from offset 4 (-want +got):\n%s", diff)
	}
	list, err := c.ListProcesses(ctx, "p")
	if err != nil || len(list) != 1 || list[0].PID != p.PID || list[0].OutputBytes != 18 {
		t.Errorf("ListProcesses = %+v, %v", list, err)
	}
	err = c.ResizeProcess(ctx, "p", p.PID, client.PtySize{Cols: 10, Rows: 10})
	assertCode(t, "ResizeProcess(no pty)", err, job.CodeSessionNoTerminal)
	err = c.SignalProcess(ctx, "p", p.PID, "NOPE")
	assertCode(t, "SignalProcess(NOPE)", err, job.CodeInvalidRequest)
	if err := c.SignalProcess(ctx, "p", p.PID, "TERM"); err != nil {
		t.Fatal(err)
	}
	var exit *client.Process
	c.FollowProcess(ctx, "p", p.PID, 0, func(ev client.ProcessEvent) error {
		exit = ev.Process
		return nil
	})
	if exit == nil || exit.State != "exited" {
		t.Fatalf("last event's process = %+v, want exited", exit)
	}
	got1, err := c.GetProcess(ctx, "p", p.PID)
	if err != nil || got1.State != "exited" || got1.EndedAt == nil {
		t.Errorf("GetProcess = %+v, %v", got1, err)
	}
	q, err := c.StartProcess(ctx, "p", client.ProcessRequest{Argv: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	if k, err := c.KillProcess(ctx, "p", q.PID); err != nil || k.Status != job.StatusCanceled {
		t.Errorf("KillProcess = %+v, %v", k, err)
	}
}
