package safecopy

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// within runs fn and fails the test if it has not returned after 10 s: a
// copy that blocks on a FIFO never returns.
func within[T any](t *testing.T, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("still blocked after 10 s")
		panic("unreachable")
	}
}

// hostile builds a tree holding every kind of entry a job can leave.
func hostile(t *testing.T) (root, outside string) {
	t.Helper()
	root, outside = t.TempDir(), t.TempDir()
	write := func(p, c string) {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("plain.txt", "hello")
	write("d/nested.txt", "nested")
	write("exact.bin", "12345678")
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(outside, filepath.Join(root, "a")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link.txt")))
	must(t, os.Symlink("d", filepath.Join(root, "inside")))
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "d2"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(root, "d2", "fifo"), 0o644))
	// A sparse 8 GiB file: a few blocks on disk, 8 GiB to read.
	f, err := os.Create(filepath.Join(root, "sparse"))
	must(t, err)
	must(t, f.Truncate(8<<30))
	f.Close()
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(t, err)
	t.Cleanup(func() { l.Close() })
	return root, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCopyFile(t *testing.T) {
	root, _ := hostile(t)
	zero := filepath.Join(root, "zero")
	// A /dev/zero twin (char 1:5): opening it would read forever.
	haveDev := syscall.Mknod(zero, syscall.S_IFCHR|0o644, 1<<8|5) == nil
	tests := []struct {
		rel   string
		limit int64
		want  string // content, when the copy succeeds
		err   error
	}{
		{"plain.txt", NoLimit, "hello", nil},
		{"d/nested.txt", 100, "nested", nil},
		{"./d/../plain.txt", NoLimit, "hello", nil},
		{"exact.bin", 8, "12345678", nil},
		{"exact.bin", 7, "", ErrTooLarge},
		{"sparse", 1 << 20, "", ErrTooLarge},
		{"a/secret", NoLimit, "", ErrSymlink},
		{"link.txt", NoLimit, "", ErrSymlink},
		{"inside/nested.txt", NoLimit, "", ErrSymlink},
		{"fifo", NoLimit, "", ErrNotRegular},
		{"d2/fifo", NoLimit, "", ErrNotRegular},
		{"sock", NoLimit, "", ErrNotRegular},
		{"d", NoLimit, "", ErrNotRegular},
		{".", NoLimit, "", ErrNotRegular},
		{"../escape", NoLimit, "", ErrOutside},
		{"/etc/passwd", NoLimit, "", ErrOutside},
		{"missing", NoLimit, "", fs.ErrNotExist},
		{"plain.txt/x", NoLimit, "", syscall.ENOTDIR},
	}
	if haveDev {
		tests = append(tests, struct {
			rel   string
			limit int64
			want  string
			err   error
		}{"zero", NoLimit, "", ErrNotRegular})
	} else {
		t.Log("mknod is not permitted here: the device case is not run")
	}
	for _, walk := range []bool{false, true} {
		forceWalk = walk
		r, err := OpenRoot(root)
		must(t, err)
		for _, tt := range tests {
			dst := filepath.Join(t.TempDir(), "out")
			got := within(t, func() error {
				_, err := r.CopyFile(context.Background(), tt.rel, dst, 0o644, tt.limit)
				return err
			})
			if !errors.Is(got, tt.err) || (tt.err == nil) != (got == nil) {
				t.Errorf("walk=%v: CopyFile(%q, %d) = %v, want %v", walk, tt.rel, tt.limit, got, tt.err)
				continue
			}
			b, rerr := os.ReadFile(dst)
			switch {
			case tt.err == nil && string(b) != tt.want:
				t.Errorf("walk=%v: copy of %q = %q, want %q", walk, tt.rel, b, tt.want)
			case tt.err != nil && rerr == nil:
				t.Errorf("walk=%v: refused copy of %q left %d bytes at its destination", walk, tt.rel, len(b))
			}
		}
		r.Close()
	}
	forceWalk = false
}

// TestCopyCappedOnBytesRead: a source with more bytes than it claimed
// (a file that grows while it is read) is refused once the cap is passed,
// and the writer never gets more than the cap.
func TestCopyCappedOnBytesRead(t *testing.T) {
	tests := []struct {
		src   string
		limit int64
		want  string
		err   error
	}{
		{"", 0, "", nil},
		{"abc", 3, "abc", nil},
		{"abcd", 3, "abc", ErrTooLarge},
		{strings.Repeat("x", 1<<20), 10, "xxxxxxxxxx", ErrTooLarge},
		{"abcd", NoLimit, "abcd", nil},
	}
	for _, tt := range tests {
		var w bytes.Buffer
		n, err := copyCapped(context.Background(), &w, strings.NewReader(tt.src), tt.limit)
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("copyCapped(%d bytes, %d) error = %v, want %v", len(tt.src), tt.limit, err, tt.err)
		}
		if got := w.String(); got != tt.want || n != int64(len(tt.want)) {
			t.Errorf("copyCapped(%d bytes, %d) wrote %q (n=%d), want %q", len(tt.src), tt.limit, got, n, tt.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := copyCapped(ctx, &bytes.Buffer{}, strings.NewReader("x"), NoLimit); !errors.Is(err, context.Canceled) {
		t.Errorf("copyCapped with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestBudget(t *testing.T) {
	tests := []struct {
		name    string
		b       Budget
		take    []int64
		fileCap int64
		want    int64
		err     error
	}{
		{"unbounded", Budget{}, []int64{5, 5}, NoLimit, NoLimit, nil},
		{"file cap only", Budget{}, nil, 10, 10, nil},
		{"bytes left below the file cap", Budget{MaxBytes: 12}, []int64{5}, 10, 7, nil},
		{"file cap below the bytes left", Budget{MaxBytes: 100}, []int64{5}, 10, 10, nil},
		{"no file cap", Budget{MaxBytes: 12}, []int64{5}, NoLimit, 7, nil},
		{"bytes spent", Budget{MaxBytes: 10}, []int64{10}, 10, 0, nil},
		{"files spent", Budget{MaxFiles: 2}, []int64{1, 1}, 10, 0, ErrBudget},
	}
	for _, tt := range tests {
		for _, n := range tt.take {
			tt.b.Take(n)
		}
		got, err := tt.b.Limit(tt.fileCap)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: Limit(%d) = %d, %v; want %d, %v", tt.name, tt.fileCap, got, err, tt.want, tt.err)
		}
	}
}

func TestWalk(t *testing.T) {
	root, _ := hostile(t)
	must(t, os.MkdirAll(filepath.Join(root, "skip", "deep"), 0o755))
	for _, walk := range []bool{false, true} {
		forceWalk = walk
		r, err := OpenRoot(root)
		must(t, err)
		var got []string
		err = within(t, func() error {
			return r.Walk(context.Background(), func(rel string, info Info) error {
				got = append(got, rel+" "+info.Mode.Type().String())
				if rel == "skip" {
					return fs.SkipDir
				}
				return nil
			})
		})
		must(t, err)
		want := []string{
			"a L---------", "d d---------", "d/nested.txt ----------", "d2 d---------", "d2/fifo p---------",
			"exact.bin ----------", "fifo p---------", "inside L---------", "link.txt L---------",
			"plain.txt ----------", "skip d---------", "sock S---------", "sparse ----------",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("walk=%v: Walk (-want +got):\n%s", walk, diff)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.Walk(ctx, func(string, Info) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Errorf("Walk with a cancelled context = %v, want context.Canceled", err)
		}
		r.Close()
	}
	forceWalk = false
}

func TestSubAndRootRefuseSymlinks(t *testing.T) {
	root, outside := hostile(t)
	for _, walk := range []bool{false, true} {
		forceWalk = walk
		r, err := OpenRoot(root)
		must(t, err)
		if _, err := r.Sub("a"); !errors.Is(err, ErrSymlink) {
			t.Errorf("walk=%v: Sub(a -> %s) = %v, want ErrSymlink", walk, outside, err)
		}
		sub, err := r.Sub("d")
		if err != nil {
			t.Fatalf("walk=%v: Sub(d) = %v", walk, err)
		}
		var w bytes.Buffer
		if _, err := sub.Copy(context.Background(), "nested.txt", &w, NoLimit); err != nil || w.String() != "nested" {
			t.Errorf("walk=%v: Sub(d).Copy(nested.txt) = %q, %v", walk, w.String(), err)
		}
		sub.Close()
		r.Close()
	}
	forceWalk = false
	if _, err := OpenRoot(filepath.Join(root, "a")); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenRoot of a symlink = %v, want ErrSymlink", err)
	}
}
