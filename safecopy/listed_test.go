package safecopy

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadDirAndReadlink(t *testing.T) {
	root, outside := hostile(t)
	odd := "back\\slash\nname"
	must(t, os.WriteFile(filepath.Join(root, "d", odd), []byte("odd"), 0o644))
	for _, walk := range []bool{false, true} {
		forceWalk = walk
		r, err := OpenRoot(root)
		must(t, err)
		ents, err := r.ReadDir("d")
		must(t, err)
		var got []string
		for _, e := range ents {
			got = append(got, e.Name+" "+e.Info.Mode.Type().String())
		}
		if diff := cmp.Diff([]string{odd + " ----------", "nested.txt ----------"}, got); diff != "" {
			t.Errorf("walk=%v: ReadDir(d) (-want +got):\n%s", walk, diff)
		}
		ents, err = r.ReadDir(".")
		must(t, err)
		links := map[string]string{}
		for _, e := range ents {
			if e.Target != "" {
				links[e.Name] = e.Target
			}
		}
		want := map[string]string{"a": outside, "link.txt": filepath.Join(outside, "secret"), "inside": "d"}
		if diff := cmp.Diff(want, links); diff != "" {
			t.Errorf("walk=%v: ReadDir(.) link targets (-want +got):\n%s", walk, diff)
		}
		if _, err := r.ReadDir("a"); !errors.Is(err, ErrSymlink) {
			t.Errorf("walk=%v: ReadDir(a -> outside) = %v, want ErrSymlink", walk, err)
		}
		if _, err := r.ReadDir("inside"); !errors.Is(err, ErrSymlink) {
			t.Errorf("walk=%v: ReadDir(inside -> d) = %v, want ErrSymlink", walk, err)
		}
		if got, err := r.Readlink("inside"); err != nil || got != "d" {
			t.Errorf("walk=%v: Readlink(inside) = %q, %v; want d", walk, got, err)
		}
		if _, err := r.Readlink("a/secret"); !errors.Is(err, ErrSymlink) {
			t.Errorf("walk=%v: Readlink(a/secret) = %v, want ErrSymlink", walk, err)
		}
		if info, err := r.Lstat("d/" + odd); err != nil || info.Size != 3 {
			t.Errorf("walk=%v: Lstat of an odd name = %+v, %v; want 3 bytes", walk, info, err)
		}
		if info, err := r.Stat(); err != nil || !info.Mode.IsDir() {
			t.Errorf("walk=%v: Stat() = %+v, %v; want a directory", walk, info, err)
		}
		r.Close()
	}
	forceWalk = false
}

// TestListed: what a walk listed is read again only if it is the same
// file, and written no more readable than it was listed.
func TestListed(t *testing.T) {
	root, _ := hostile(t)
	r, err := OpenRoot(root)
	must(t, err)
	defer r.Close()
	plain, err := r.Lstat("plain.txt")
	must(t, err)
	nested, err := r.Lstat("d/nested.txt")
	must(t, err)
	private := plain
	private.Mode = private.Mode&^fs.ModePerm | 0o600
	tests := []struct {
		name     string
		rel      string
		seen     Info
		wantMode fs.FileMode
		err      error
	}{
		{"as listed", "plain.txt", plain, 0o644, nil},
		{"listed private", "plain.txt", private, 0o600, nil},
		{"another file", "plain.txt", nested, 0, ErrChanged},
		{"through a link", "inside/nested.txt", nested, 0, ErrSymlink},
		{"climbs out", "../plain.txt", plain, 0, ErrOutside},
		{"a fifo", "fifo", plain, 0, ErrNotRegular},
	}
	for _, tt := range tests {
		dst := filepath.Join(t.TempDir(), "out")
		c, err := r.CopyListed(context.Background(), tt.rel, dst, tt.seen, NoLimit)
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: CopyListed(%q) = %v, want %v", tt.name, tt.rel, err, tt.err)
			continue
		}
		s, serr := r.SumListed(context.Background(), tt.rel, tt.seen, NoLimit)
		if !errors.Is(serr, tt.err) || (tt.err == nil) != (serr == nil) {
			t.Errorf("%s: SumListed(%q) = %v, want %v", tt.name, tt.rel, serr, tt.err)
		}
		fi, lerr := os.Lstat(dst)
		if tt.err != nil {
			if lerr == nil {
				t.Errorf("%s: refused copy left a file at its destination", tt.name)
			}
			continue
		}
		if lerr != nil || fi.Mode().Perm() != tt.wantMode&^umask(t) {
			t.Errorf("%s: copy mode = %v, %v; want %v", tt.name, fi.Mode(), lerr, tt.wantMode)
		}
		if s != c || c.Size != 5 {
			t.Errorf("%s: SumListed = %+v, CopyListed = %+v; want the same, 5 bytes", tt.name, s, c)
		}
	}
}

// umask returns the process umask, read from a file made with 0777.
func umask(t *testing.T) fs.FileMode {
	t.Helper()
	p := filepath.Join(t.TempDir(), "u")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o777)
	must(t, err)
	f.Close()
	fi, err := os.Stat(p)
	must(t, err)
	return 0o777 &^ fi.Mode().Perm()
}
