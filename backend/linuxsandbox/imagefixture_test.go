package linuxsandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

// imageSpec is backendtest.Spec on img.
func imageSpec(t testing.TB, img backend.Image, argv ...string) (backend.Spec, *backendtest.Buffer, *backendtest.Buffer) {
	t.Helper()
	spec, out, errb := backendtest.Spec(t, argv...)
	spec.Image = &img
	return spec, out, errb
}

// imageSandbox is a root backend that can run img, or skips t.
func imageSandbox(t testing.TB) *linuxsandbox.Backend {
	t.Helper()
	b, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable on this host: %v", err)
	}
	if !b.Capabilities().Images {
		t.Skip("linux_sandbox runs no images here (not root)")
	}
	return b
}

// ownedTreeDigest identifies a tree by every entry's path, type, mode,
// owner, size, modification time, link target and content.
func ownedTreeDigest(t testing.TB, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s %v %d:%d %d %d\x00", rel, fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Write([]byte(target))
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
