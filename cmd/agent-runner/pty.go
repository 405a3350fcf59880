package main

import (
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// pty is a pseudo-terminal the runner allocates for an interactive
// sandbox: the sandbox gets the slave, the user's terminal talks to the
// master. The user's own terminal is never handed to the sandbox (a
// process holding it could push keystrokes into it with TIOCSTI).
type pty struct{ master, slave *os.File }

func openPTY() (*pty, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, err
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, err
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &pty{master: m, slave: s}, nil
}

// attach puts the user's terminal in raw mode, keeps the pty's window
// size in step with it and copies both ways. The returned function, called
// after the sandbox exited, drains the output and restores the terminal.
func (p *pty) attach(in, out *os.File) func() {
	fd := int(in.Fd())
	restore := makeRaw(in)
	resize := func() {
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			_ = unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, ws)
		}
	}
	resize()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			resize()
		}
	}()
	go io.Copy(p.master, in) // ends with the process
	copied := make(chan struct{})
	go func() {
		io.Copy(out, p.master) // EIO once every slave descriptor is closed
		close(copied)
	}()
	return func() {
		p.slave.Close()
		select {
		case <-copied:
		case <-time.After(2 * time.Second):
		}
		signal.Stop(winch)
		close(winch)
		p.master.Close()
		restore()
	}
}

// readerOnly hides an *os.File, so the sandbox gets a pipe instead of
// the runner's own descriptor (a terminal, for one).
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
