package queue

import (
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agent-runner/agent-runner/job"
)

// TokenFileName is the generated shared token's file in the embedded
// server's directory (<store>/nats).
const TokenFileName = "token"

// EnsureTokenFile returns the shared token kept in dir/token, creating
// it (random, 0600, dir made 0700) when there is none, so that a
// listener always needs a credential and only the runner's user can read
// it. The token is kept across restarts: workers reconnecting after one
// still present it. A file that others than its owner may read, or that
// is not a regular file, is refused.
func EnsureTokenFile(dir string) (path, token string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", job.Wrap(job.CodeRunIOFailed, err, "cannot create the NATS directory")
	}
	// The directory also holds the queued jobs' messages.
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", "", job.Wrap(job.CodeRunIOFailed, err, "cannot restrict the NATS directory")
	}
	path = filepath.Join(dir, TokenFileName)
	token, err = ReadTokenFile(path)
	if err == nil {
		return path, token, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	token = "nats_" + rand.Text() + rand.Text()
	tmp := path + ".tmp-" + rand.Text()[:8]
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", "", job.Wrap(job.CodeRunIOFailed, err, "cannot write the NATS token file")
	}
	_, werr := f.WriteString(token + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return "", "", job.Wrap(job.CodeRunIOFailed, err, "cannot write the NATS token file")
	}
	// link(2) never replaces: a file another serve wrote meanwhile wins.
	if err := os.Link(tmp, path); err != nil && !os.IsExist(err) {
		os.Remove(tmp)
		return "", "", job.Wrap(job.CodeRunIOFailed, err, "cannot write the NATS token file")
	}
	os.Remove(tmp)
	token, err = ReadTokenFile(path)
	return path, token, err
}

// ReadTokenFile reads a token file (the token, one line): a regular file
// that only its owner may read or write. The error wraps fs.ErrNotExist
// when there is none.
func ReadTokenFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", job.Wrap(job.CodeInvalidRequest, err, "cannot read the NATS token file").With("path", path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", job.Wrap(job.CodeInvalidRequest, err, "cannot read the NATS token file").With("path", path)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return "", job.Errorf(job.CodeInvalidRequest, "the NATS token file must be a regular file only its owner can read (mode 0600)").With("path", path)
	}
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return "", job.Wrap(job.CodeInvalidRequest, err, "cannot read the NATS token file").With("path", path)
	}
	token := strings.TrimSpace(string(b[:n]))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", job.Errorf(job.CodeInvalidRequest, "the NATS token file holds no token").With("path", path)
	}
	return token, nil
}
