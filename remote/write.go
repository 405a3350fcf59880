package remote

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
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

// temp copies src beside f's path and checks its size and SHA-256.
func (w fileWriter) temp(src io.Reader, f File, sync bool) (string, error) {
	dir := path.Dir(f.Path)
	if dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return "", job.Wrap(job.CodeRunIOFailed, err, "cannot create a record directory").With("path", dir)
		}
	}
	tmp := path.Join(dir, "."+path.Base(f.Path)+".remote-"+rand.Text()[:12])
	out, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
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
