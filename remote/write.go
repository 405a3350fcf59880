package remote

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/agent-runner/agent-runner/job"
)

// fileWriter writes record files under a root (no path can leave it: the
// names are the worker's, checked, and resolved by os.Root), through a
// temp file whose content is checked against the manifest before it takes
// its name.
type fileWriter struct {
	root    *os.Root
	durable bool
}

// replace writes f, replacing what was there (the rename is atomic).
func (w fileWriter) replace(src io.Reader, f File) error {
	tmp, err := w.temp(src, f, false)
	if err != nil {
		return err
	}
	if err := w.root.Rename(tmp, f.Path); err != nil {
		w.root.Remove(tmp)
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write a record file").With("path", f.Path)
	}
	return nil
}

// create writes f only if nothing has its name (link(2) never replaces):
// os.ErrExist when something does.
func (w fileWriter) create(src io.Reader, f File) error {
	tmp, err := w.temp(src, f, w.durable)
	if err != nil {
		return err
	}
	defer w.root.Remove(tmp)
	if err := w.root.Link(tmp, f.Path); err != nil {
		if os.IsExist(err) {
			return os.ErrExist
		}
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write a record file").With("path", f.Path)
	}
	if w.durable {
		if d, err := w.root.Open(path.Dir(f.Path)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

// maxCommitBytes bounds a commit file that is read to be checked
// (Kind.Final, Kind.CheckCommit): a task's state.json is a few hundred
// bytes.
const maxCommitBytes = 1 << 20

// replaceCommit writes the commit file f of record id for a kind whose
// receiving side has one of its own (Kind.Replace): checked by
// k.CheckCommit, then renamed over the one there unless that one is final
// (os.ErrExist). It returns what it replaced (nil: nothing was there).
//
// The final check and the rename are not one atomic step: a writer of
// this directory that does not hold MirrorConfig.Lock can still finish
// the record in between, and the record then replaces it.
func (w fileWriter) replaceCommit(src io.Reader, f File, id string, k Kind) ([]byte, error) {
	tmp, err := w.temp(src, f, w.durable)
	if err != nil {
		return nil, err
	}
	defer w.root.Remove(tmp) // nothing once renamed
	if k.CheckCommit != nil {
		b, err := w.root.ReadFile(tmp)
		if err != nil {
			return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot read a record file").With("path", f.Path)
		}
		if err := k.CheckCommit(id, b); err != nil {
			return nil, permanent{err}
		}
	}
	prev, err := w.root.ReadFile(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		prev = nil
	case err != nil:
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot read a record file").With("path", f.Path)
	case len(prev) > maxCommitBytes:
		return nil, job.Errorf(job.CodeRunIOFailed, "this node's commit file is larger than %d bytes", maxCommitBytes).With("path", f.Path)
	case k.Final == nil || k.Final(prev):
		return nil, os.ErrExist
	}
	if err := w.root.Rename(tmp, f.Path); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot write a record file").With("path", f.Path)
	}
	if w.durable {
		if d, err := w.root.Open(path.Dir(f.Path)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return prev, nil
}

// ReadCommit reads a commit file of at most maxCommitBytes.
func ReadCommit(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCommitBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCommitBytes {
		return nil, errors.New("commit file too large")
	}
	return b, nil
}

// temp copies src beside f's path and checks its size and SHA-256.
func (w fileWriter) temp(src io.Reader, f File, sync bool) (string, error) {
	dir := path.Dir(f.Path)
	if dir != "." {
		if err := w.root.MkdirAll(dir, 0o700); err != nil {
			return "", job.Wrap(job.CodeRunIOFailed, err, "cannot create a record directory").With("path", dir)
		}
	}
	tmp := path.Join(dir, "."+path.Base(f.Path)+".remote-"+rand.Text()[:12])
	out, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", job.Wrap(job.CodeRunIOFailed, err, "cannot write a record file").With("path", f.Path)
	}
	fail := func(err error) (string, error) {
		out.Close()
		w.root.Remove(tmp)
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(src, f.Size+1))
	if err != nil {
		return fail(job.Wrap(job.CodeRunIOFailed, err, "cannot copy a record file").With("path", f.Path))
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fail(job.Errorf(job.CodeRunIOFailed, "record file does not match its size and SHA-256").With("path", f.Path))
	}
	if sync {
		if err := out.Sync(); err != nil {
			return fail(job.Wrap(job.CodeRunIOFailed, err, "cannot write a record file").With("path", f.Path))
		}
	}
	if err := out.Close(); err != nil {
		w.root.Remove(tmp)
		return "", job.Wrap(job.CodeRunIOFailed, err, "cannot write a record file").With("path", f.Path)
	}
	return tmp, nil
}
