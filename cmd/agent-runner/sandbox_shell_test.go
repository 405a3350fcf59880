package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ptyScreen reads a pty master in the background; waitFor blocks until
// what it showed since the last wait holds a string.
type ptyScreen struct {
	t    *testing.T
	seen chan []byte
	buf  bytes.Buffer
}

func readPTY(t *testing.T, master *os.File) *ptyScreen {
	s := &ptyScreen{t: t, seen: make(chan []byte, 64)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			if n > 0 {
				s.seen <- append([]byte(nil), b[:n]...)
			}
			if err != nil {
				close(s.seen)
				return
			}
		}
	}()
	return s
}

// waitFor returns what the terminal showed up to want (or, for "",
// anything); a bound on the
// whole test (not a timing assertion) fails a shell that never answers.
func (s *ptyScreen) waitFor(want string) string {
	s.t.Helper()
	deadline := time.After(time.Minute)
	for s.buf.Len() == 0 || !strings.Contains(s.buf.String(), want) {
		select {
		case b, ok := <-s.seen:
			if !ok {
				s.t.Fatalf("waiting for %q, the terminal closed: %q", want, s.buf.String())
			}
			s.buf.Write(b)
		case <-deadline:
			s.t.Fatalf("waiting for %q, the terminal showed %q", want, s.buf.String())
		}
	}
	shown := s.buf.String()
	s.buf.Reset()
	return shown
}

// TestSandboxShellOnATerminal: `sandbox shell` under a terminal gives
// the sandbox's shell a pty of the terminal's size, follows a resize
// (SIGWINCH), passes the shell's exit code through, and leaves the
// terminal's mode as it found it.
func TestSandboxShellOnATerminal(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	srv := startServer(t, filepath.Join(dir, "store"), addr)
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	server := "http://" + addr
	if out, stderr, code := cli(t, "", "sandbox", "create", "--id", "tty", "--server", server); code != 0 {
		t.Fatalf("create = %d %s %s", code, out, stderr)
	}
	p, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer p.master.Close()
	defer p.slave.Close()
	if err := unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 111}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "sandbox", "shell", "tty", "--server", server, "--", "sh")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	screen := readPTY(t, p.master)
	// The shell's first output (its prompt) comes once the command has
	// put the terminal in raw mode and copies.
	screen.waitFor("")
	p.master.Write([]byte("stty size; echo end-$((1+1))\n"))
	if shown := screen.waitFor("end-2"); !strings.Contains(shown, "33 111") {
		t.Errorf("stty size showed %q, want 33 111", shown)
	}
	if err := unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	// The resize travels beside the typing: ask until it arrived (the
	// bound only keeps a lost resize from hanging the test).
	for give := time.Now().Add(time.Minute); ; {
		p.master.Write([]byte("stty size; echo end-$((1+2))\n"))
		shown := screen.waitFor("end-3")
		if strings.Contains(shown, "40 120") {
			break
		}
		if time.Now().After(give) {
			t.Fatalf("after the terminal became 120x40, stty size still shows %q", shown)
		}
	}
	p.master.Write([]byte("exit 4\n"))
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 {
			t.Errorf("sandbox shell exit = %v, want exit status 4", err)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("sandbox shell did not exit")
	}
	after, err := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Errorf("terminal mode after exit = %+v, want it restored to %+v", after, before)
	}
}
