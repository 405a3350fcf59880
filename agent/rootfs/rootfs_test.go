package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestLocate(t *testing.T) {
	roots := []string{"/srv/logs", "/srv/logs/deep", "/data"}
	tests := []struct {
		p    string
		root string
		rel  string
		err  error
	}{
		{"", "", "", ErrEmpty}, // seed: empty path rejected
		{"logs/app.log", "/srv/logs", "app.log", nil},
		{"./logs/./app.log", "/srv/logs", "app.log", nil},
		{"other/../logs/app.log", "/srv/logs", "app.log", nil}, // seed: ".." normalized against cwd
		{"logs/../logs/app.log", "/srv/logs", "app.log", nil},
		{"logs", "/srv/logs", ".", nil},
		{"logs/deep/x", "/srv/logs/deep", "x", nil},
		{"/data/a/b", "/data", "a/b", nil},
		{"logs/../secret", "", "", ErrOutside},
		{"../../etc/passwd", "", "", ErrOutside},
		{"/srv/logsX/a", "", "", ErrOutside},
		{"/etc/hosts", "", "", ErrOutside},
		{"/data/../etc", "", "", ErrOutside},
		{"a\x00b", "", "", ErrOddByte},
		{"\xff", "", "", ErrOddByte},
		{strings.Repeat("a", MaxPathLen+1), "", "", ErrTooLong},
	}
	for _, tt := range tests {
		loc, err := Locate(roots, "/srv", tt.p)
		if !errors.Is(err, tt.err) {
			t.Errorf("Locate(%q) err = %v, want %v", tt.p, err, tt.err)
			continue
		}
		if loc.Root != tt.root || loc.Rel != tt.rel {
			t.Errorf("Locate(%q) = %q %q, want %q %q", tt.p, loc.Root, loc.Rel, tt.root, tt.rel)
		}
	}
}

// tree builds root/{logs/app.log, logs/sub/x.log, secret.txt} and symlinks
// logs/out -> ../secret.txt, logs/in -> app.log, logs/dirlink -> .. .
func tree(t *testing.T) (root, logs string) {
	t.Helper()
	root = t.TempDir()
	logs = filepath.Join(root, "logs")
	must(t, os.MkdirAll(filepath.Join(logs, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(logs, "app.log"), []byte("inside\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(logs, "sub", "x.log"), []byte("x\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "secret.txt"), []byte("SECRET\n"), 0o644))
	must(t, os.Symlink("../secret.txt", filepath.Join(logs, "out")))
	must(t, os.Symlink("app.log", filepath.Join(logs, "in")))
	must(t, os.Symlink("..", filepath.Join(logs, "dirlink")))
	return root, logs
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func bothModes(t *testing.T, f func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			forceWalk = walk
			defer func() { forceWalk = false }()
			f(t)
		})
	}
}

func TestOpen(t *testing.T) {
	_, logs := tree(t)
	tests := []struct {
		rel  string
		want string
		err  error
	}{
		{"app.log", "inside\n", nil},
		{"sub/x.log", "x\n", nil},
		{"out", "", ErrSymlink}, // symlink to outside
		{"in", "", ErrSymlink},  // symlinks are refused even inside
		{"dirlink/secret.txt", "", ErrSymlink},
		{"missing", "", os.ErrNotExist},
		{"app.log/x", "", ErrNotDir},
	}
	bothModes(t, func(t *testing.T) {
		for _, tt := range tests {
			f, err := Open(Location{Root: logs, Rel: tt.rel}, unix.O_RDONLY)
			if !errors.Is(err, tt.err) {
				t.Errorf("Open(%q) err = %v, want %v", tt.rel, err, tt.err)
				continue
			}
			if err != nil {
				continue
			}
			b := make([]byte, 64)
			n, _ := f.Read(b)
			f.Close()
			if got := string(b[:n]); got != tt.want {
				t.Errorf("Open(%q) read %q, want %q", tt.rel, got, tt.want)
			}
		}
	})
}

// TestSwapRace swaps a directory and a file for symlinks to outside the
// root while another goroutine opens them; no open may ever reach the
// secret. The loop is bounded by iterations, not time.
func TestSwapRace(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		root, logs := tree(t)
		outside := filepath.Join(root, "outdir")
		must(t, os.MkdirAll(outside, 0o755))
		must(t, os.WriteFile(filepath.Join(outside, "f.log"), []byte("SECRET\n"), 0o644))
		must(t, os.MkdirAll(filepath.Join(logs, "d"), 0o755))
		must(t, os.WriteFile(filepath.Join(logs, "d", "f.log"), []byte("inside\n"), 0o644))
		must(t, os.Symlink(outside, filepath.Join(logs, "d.evil")))
		must(t, os.Symlink(filepath.Join(outside, "f.log"), filepath.Join(logs, "f.evil")))
		must(t, os.WriteFile(filepath.Join(logs, "f.log"), []byte("inside\n"), 0o644))

		const rounds = 3000
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// renameat2(RENAME_EXCHANGE) swaps atomically: d <-> d.evil, f.log <-> f.evil.
				unix.Renameat2(unix.AT_FDCWD, filepath.Join(logs, "d"), unix.AT_FDCWD, filepath.Join(logs, "d.evil"), unix.RENAME_EXCHANGE)
				unix.Renameat2(unix.AT_FDCWD, filepath.Join(logs, "f.log"), unix.AT_FDCWD, filepath.Join(logs, "f.evil"), unix.RENAME_EXCHANGE)
			}
		}()
		opened, denied := 0, 0
		for i := 0; i < rounds; i++ {
			for _, rel := range []string{"d/f.log", "f.log"} {
				loc, err := Locate([]string{logs}, logs, rel)
				if err != nil {
					t.Fatal(err)
				}
				f, err := Open(loc, unix.O_RDONLY)
				if err != nil {
					denied++
					continue
				}
				b := make([]byte, 16)
				n, _ := f.Read(b)
				f.Close()
				opened++
				if strings.Contains(string(b[:n]), "SECRET") {
					close(stop)
					wg.Wait()
					t.Fatalf("round %d: %s escaped the root and read the secret", i, rel)
				}
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("%d opens inside the root, %d refused, 0 escapes", opened, denied)
	})
}

func FuzzResolve(f *testing.F) {
	root := f.TempDir()
	logs := filepath.Join(root, "logs")
	os.MkdirAll(filepath.Join(logs, "a"), 0o755)
	os.WriteFile(filepath.Join(logs, "a", "f"), []byte("in"), 0o644)
	os.WriteFile(filepath.Join(root, "secret"), []byte("SECRET"), 0o644)
	os.Symlink("../secret", filepath.Join(logs, "s"))
	os.Symlink("..", filepath.Join(logs, "up"))
	for _, s := range []string{"logs/a/f", "logs/../secret", "logs/s", "logs/up/secret", "", "/etc/passwd", "logs/a/../../secret", "logs//a/./f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		loc, err := Locate([]string{logs}, root, p)
		if err != nil {
			return
		}
		if loc.Abs() != logs && !strings.HasPrefix(loc.Abs(), logs+"/") {
			t.Fatalf("Locate(%q) = %q, outside %q", p, loc.Abs(), logs)
		}
		for _, walk := range []bool{false, true} {
			forceWalk = walk
			fh, err := Open(loc, unix.O_RDONLY)
			forceWalk = false
			if err != nil {
				continue
			}
			b := make([]byte, 16)
			n, _ := fh.Read(b)
			fh.Close()
			if strings.Contains(string(b[:n]), "SECRET") {
				t.Fatalf("Open(%q) walk=%v read the secret", p, walk)
			}
		}
	})
}
