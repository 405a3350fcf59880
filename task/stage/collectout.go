package stage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// scratch is where the collection sandbox writes: out, a fresh directory
// of mode 0777 with a random name inside parent, a runner-owned 0711
// directory made after the agent exited.
//
// The sandbox's host uid is the backend's choice (and may change per
// run), so out is writable by any uid rather than chowned to one. That
// is safe because the sandbox sees only out (bound at its host path),
// cannot rename or replace it (parent is not writable to it), and other
// host users cannot find it (parent is not listable, the name is random);
// parent stays searchable because the sandbox init must reach out to bind
// it. Nothing in out is trusted: the host reads it as the agent's data.
type scratch struct{ parent, out string }

func newScratch() (scratch, error) {
	parent, err := os.MkdirTemp("", "agent-runner-collect-")
	if err != nil {
		return scratch{}, err
	}
	var name [16]byte
	rand.Read(name[:])
	sc := scratch{parent: parent, out: filepath.Join(parent, hex.EncodeToString(name[:]))}
	for _, step := range []func() error{
		func() error { return os.Chmod(parent, 0o711) },
		func() error { return os.Mkdir(sc.out, 0o777) },
		func() error { return os.Chmod(sc.out, 0o777) }, // past the umask
	} {
		if err := step(); err != nil {
			sc.remove()
			return scratch{}, err
		}
	}
	return sc, nil
}

func (s scratch) remove() { os.RemoveAll(s.parent) }

// errTooLarge: an output is over the collection cap.
var errTooLarge = errors.New("output over the collection cap")

// readOutput reads a file the sandbox wrote, at most max bytes of it.
func readOutput(path string, max int64) ([]byte, error) {
	f, err := openOutput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, max)
}

// openOutput opens path for reading only if it is a regular file: the
// sandbox may have replaced it with a symlink (O_NOFOLLOW refuses it) or
// a FIFO (O_NONBLOCK opens it without waiting for a writer, and the
// mode check refuses it).
func openOutput(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%v)", filepath.Base(path), fi.Mode().Type())
	}
	return f, nil
}

// readAtMost reads r to its end, or fails with errTooLarge having read
// max+1 bytes: the cap counts bytes read, not a size the file claims.
func readAtMost(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errTooLarge
	}
	return b, nil
}

// tailBuffer keeps the last max bytes written to it (the sandbox's
// stderr, whose end holds git's fatal message).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// shareBase makes base.git readable by other uids (the sandbox's), as a
// runner with umask 077 would not have made it. It is the runner's own
// copy, in no sandbox's writable view.
func shareBase(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fi.Mode().Perm() | 0o044
		if d.IsDir() {
			want |= 0o011
		}
		if want == fi.Mode().Perm() {
			return nil
		}
		return os.Chmod(p, want)
	})
}
