package backend

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// Stdio is the runner's side of one process's standard input, output
// and error (an Exec's), shared by the backends: In, Out and Err are
// the descriptors to hand the process (a local child's, or sent to a
// sandbox's init); Started closes the runner's copies of them once the
// process holds them, Drain waits for its output after it ended.
//
// A *os.File reader or writer is handed over as it is (nothing copies
// it); nil stdin is /dev/null and nil output /dev/null; any other
// reader is copied into a pipe by a goroutine nobody waits for (it ends
// on its next write once the process is gone), any other writer is fed
// from a pipe. With a Terminal all three are the slave of a new
// pseudo-terminal whose master the runner copies Stdin into and Stdout
// from.
type Stdio struct {
	In, Out, Err *os.File

	// child are the descriptors only the process needs (closed by
	// Started); stdinW is the pipe end CloseStdin closes; master is the
	// terminal's; readers are what the output copies read.
	child   []*os.File
	stdinW  *os.File
	master  *os.File
	readers []*os.File
	copies  sync.WaitGroup
	closeMu sync.Mutex
	drained bool
}

// NewStdio makes the stdio of e; a Terminal is opened on the host's
// /dev/pts.
func NewStdio(e Exec) (*Stdio, error) { return NewStdioOn(e, "/dev/pts", -1) }

// NewStdioOn is NewStdio with a Terminal opened on the devpts instance
// mounted at pts (a sandbox's own, reached from the host through its
// init's root, so the process finds its terminal under its /dev/pts:
// ttyname works), its slave owned by host uid owner (-1: left as is).
func NewStdioOn(e Exec, pts string, owner int) (_ *Stdio, err error) {
	s := &Stdio{}
	defer func() {
		if err != nil {
			s.Abort()
		}
	}()
	if e.Terminal != nil {
		if err := s.openTerminal(e, pts, owner); err != nil {
			return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot open a terminal for the process")
		}
		return s, nil
	}
	if s.In, err = s.input(e.Stdin); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot give the process its stdin")
	}
	if s.Out, err = s.output(e.Stdout); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create output pipes")
	}
	if s.Err, err = s.output(e.Stderr); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create output pipes")
	}
	return s, nil
}

func (s *Stdio) input(r io.Reader) (*os.File, error) {
	switch f := r.(type) {
	case nil:
		null, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		s.child = append(s.child, null)
		return null, nil
	case *os.File:
		return f, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.child, s.stdinW = append(s.child, pr), pw
	go func() {
		io.Copy(pw, r)
		pw.Close()
	}()
	return pr, nil
}

func (s *Stdio) output(w io.Writer) (*os.File, error) {
	switch f := w.(type) {
	case nil:
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		s.child = append(s.child, null)
		return null, nil
	case *os.File:
		return f, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.child = append(s.child, pw)
	s.copyOut(pr, w)
	return pw, nil
}

// copyOut copies r to w until r ends or Drain stops it.
func (s *Stdio) copyOut(r *os.File, w io.Writer) {
	if w == nil {
		w = io.Discard
	}
	s.readers = append(s.readers, r)
	s.copies.Add(1)
	go func() {
		defer s.copies.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
}

// Started closes the runner's copies of the descriptors the process now
// holds, so its output ends when it (and whatever inherited them) does.
func (s *Stdio) Started() {
	for _, f := range s.child {
		f.Close()
	}
	s.child = nil
}

// Abort frees everything of a process that never started.
func (s *Stdio) Abort() {
	s.Started()
	s.CloseStdin()
	s.Drain(0)
}

// Drain waits up to max for the output to end (processes the process
// left behind may hold it open), then stops the copies and closes what
// is left. Call it once the process has ended.
func (s *Stdio) Drain(max time.Duration) {
	finished := make(chan struct{})
	go func() { s.copies.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(max):
		for _, r := range s.readers {
			r.SetReadDeadline(time.Now())
		}
		<-finished
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.drained = true
	for _, r := range s.readers {
		r.Close()
	}
	if s.stdinW != nil {
		s.stdinW.Close()
	}
}

// CloseStdin ends the process's input (see Process.CloseStdin).
func (s *Stdio) CloseStdin() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	switch {
	case s.drained:
		return nil
	case s.master != nil:
		eof := byte(4)
		if t, err := unix.IoctlGetTermios(int(s.master.Fd()), unix.TCGETS); err == nil && t.Cc[unix.VEOF] != 0 {
			eof = t.Cc[unix.VEOF]
		}
		_, err := s.master.Write([]byte{eof})
		return err
	case s.stdinW != nil:
		err := s.stdinW.Close()
		if errors.Is(err, os.ErrClosed) {
			return nil
		}
		return err
	}
	return nil
}

// Resize sets the terminal's size (see Process.Resize).
func (s *Stdio) Resize(cols, rows uint16) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.master == nil {
		return job.Errorf(job.CodeRunSpawnFailed, "the process has no terminal to resize")
	}
	if s.drained {
		return nil
	}
	return setSize(s.master, cols, rows)
}
