package stage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/agent-runner/agent-runner/safecopy"
)

// scratch is where the collection writes: out, a directory of mode
// 01777 with a random name inside parent, a runner-owned 0711 directory.
// A collection in a sandbox of its own writes into out itself; one in
// the task's sandbox into a fresh directory the runner makes in out once
// the agent has ended (dir).
//
// The sandbox's host uid is the backend's choice (and may change per
// run), so out is writable by any uid rather than chowned to one. That
// is safe because the sandbox sees only out (bound at its host path),
// cannot rename or replace it (parent is not writable to it) nor the
// runner's directories in it (out is sticky), and other host users
// cannot find it (parent is not listable, the name is random); parent
// stays searchable because the sandbox init must reach out to bind it.
// When the task's steps share one sandbox, out is bound from the start,
// so the agent sees it too: the collection's directory is made only
// once the agent has ended, with a name it cannot guess. Nothing in
// out is trusted: the host reads it as the agent's data.
type scratch struct{ parent, out string }

func newScratch() (scratch, error) {
	parent, err := os.MkdirTemp("", "agent-runner-collect-")
	if err != nil {
		return scratch{}, err
	}
	sc := scratch{parent: parent, out: filepath.Join(parent, randomName())}
	for _, step := range []func() error{
		func() error { return os.Chmod(parent, 0o711) },
		func() error { return os.Mkdir(sc.out, 0o777) },
		func() error { return os.Chmod(sc.out, 0o777|os.ModeSticky) }, // past the umask
	} {
		if err := step(); err != nil {
			sc.remove() // nothing written in it yet; err says why
			return scratch{}, err
		}
	}
	return sc, nil
}

// dir makes a fresh directory in out for one collection's outputs,
// writable by any uid, and returns it.
func (s scratch) dir() (string, error) {
	d := filepath.Join(s.out, randomName())
	if err := os.Mkdir(d, 0o777); err != nil {
		return "", err
	}
	return d, os.Chmod(d, 0o777) // past the umask
}

func randomName() string {
	var name [16]byte
	rand.Read(name[:]) // never fails (crypto/rand)
	return hex.EncodeToString(name[:])
}

func (s scratch) remove() error { return os.RemoveAll(s.parent) }

// readOutputs reads the files the sandbox wrote into dir, at most max
// bytes of each, through safecopy: a symlink, FIFO or device left in
// place of an output is refused without blocking, and the cap counts the
// bytes read (safecopy.ErrTooLarge past it).
func readOutputs(ctx context.Context, dir string, max int64, names ...string) ([][]byte, []error) {
	bufs, errs := make([][]byte, len(names)), make([]error, len(names))
	root, err := safecopy.OpenRoot(dir)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return bufs, errs
	}
	defer root.Close()
	for i, name := range names {
		var b bytes.Buffer
		if _, errs[i] = root.Copy(ctx, name, &b, max); errs[i] == nil {
			bufs[i] = b.Bytes()
		}
	}
	return bufs, errs
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
