package backend

import (
	"io"
	"os"
)

// StdinFile turns Spec.Stdin into what exec should be given: nil stays nil
// (/dev/null), an *os.File is passed as is, and any other reader is copied
// into a pipe by a goroutine nobody waits for. exec would wait for its own
// copy of a non-file reader to reach EOF even after the process exited,
// and an interactive reader (a terminal behind a wrapper) never does. The
// returned function closes the pipe's read end; call it once the process
// has exited. The copy then ends on its next read.
//
// It returns an io.Reader so a missing stdin stays an untyped nil (a nil
// *os.File in exec.Cmd.Stdin would be used as a file).
func StdinFile(r io.Reader) (io.Reader, func(), error) {
	switch f := r.(type) {
	case nil:
		return nil, func() {}, nil
	case *os.File:
		return f, func() {}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	go func() {
		io.Copy(pw, r)
		pw.Close()
	}()
	return pr, func() { pr.Close() }, nil
}
