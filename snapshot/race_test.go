package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// swapRace is a workspace under attack: out/d, a real directory holding a
// file named like the host file wanted (shadow), is swapped over and over
// (renameat2 RENAME_EXCHANGE) with out/l, a symlink to a host directory
// outside the workspace whose shadow is a root-only 0600 file holding
// marker.
type swapRace struct {
	ws, marker string
	swaps      atomic.Int64
	stop       chan struct{}
	done       sync.WaitGroup
}

// startSwapRace builds the workspace and starts the swapping goroutine;
// it skips the test when not root (the escape reads a file only root can)
// or when renameat2 RENAME_EXCHANGE is unsupported here.
func startSwapRace(t *testing.T) *swapRace {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the escape reads a root-only host file, so it needs a runner running as root")
	}
	r := &swapRace{ws: t.TempDir(), marker: fmt.Sprintf("HOST-SECRET-MARKER-%d", time.Now().UnixNano()), stop: make(chan struct{})}
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "shadow"), []byte("root:"+r.marker+":19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, l := filepath.Join(r.ws, "out", "d"), filepath.Join(r.ws, "out", "l")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"out/d/shadow": "workspace shadow\n", "a.txt": "a\n", "out/b.txt": "b\n"} {
		if err := os.WriteFile(filepath.Join(r.ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(host, l); err != nil {
		t.Fatal(err)
	}
	exchange := func() error {
		return unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE)
	}
	if err := exchange(); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE is not supported here: %v", err)
	}
	if err := exchange(); err != nil {
		t.Fatalf("swapping back: %v", err)
	}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			if exchange() == nil {
				r.swaps.Add(1)
			}
		}
	}()
	t.Cleanup(r.halt)
	return r
}

// halt stops the swapping (idempotent).
func (r *swapRace) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.done.Wait()
}

// check fails the test for anything in the snapshot tree dst that came
// from outside the workspace: a file holding the marker, a symlink with
// an absolute target or one resolving out of dst, or a manifest entry
// whose path is not clean and relative.
func (r *swapRace) check(t *testing.T, dst string, m Manifest) {
	t.Helper()
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dst {
				return nil // the snapshot failed before it made dst
			}
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				t.Errorf("snapshot holds %s -> %s: a link out of the workspace", p, target)
			}
			if real, err := filepath.EvalSymlinks(p); err == nil && real != dst && !strings.HasPrefix(real, dst+"/") {
				t.Errorf("snapshot link %s resolves to %s, outside the snapshot", p, real)
			}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), r.marker) {
				t.Errorf("snapshot file %s holds the host file's content %q", p, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("reading the snapshot %s: %v", dst, err)
	}
	for _, e := range m.Entries {
		if filepath.IsAbs(e.Path) || strings.HasPrefix(e.Path, "../") || filepath.Clean(e.Path) != e.Path {
			t.Errorf("manifest entry %q is not a clean path inside the workspace", e.Path)
		}
	}
}

// raceOutcome counts how the snapshots under attack ended.
type raceOutcome struct{ ok, failed int }

func (o *raceOutcome) add(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		o.ok++
		return
	}
	o.failed++
	if got, want := job.CodeOf(err), job.CodeSnapshotFailed; got != want {
		t.Errorf("snapshot under attack: error code %q (%v), want %q", got, err, want)
	}
}

// TestCopyUnderSymlinkSwap: Copy while a workspace directory is swapped
// with a link to a host directory never copies the host file (the old
// walk listed and opened paths by name and followed the swapped-in link:
// /etc/shadow landed in the snapshot within a few jobs).
func TestCopyUnderSymlinkSwap(t *testing.T) {
	r := startSwapRace(t)
	const runs = 300
	base := t.TempDir()
	var out raceOutcome
	start := time.Now()
	for i := 0; i < runs && !t.Failed(); i++ {
		dst := filepath.Join(base, fmt.Sprint(i))
		m, err := Copy(context.Background(), r.ws, dst, Options{})
		out.add(t, err)
		r.check(t, dst, m)
		os.RemoveAll(dst)
	}
	r.halt()
	t.Logf("%d snapshots (%d complete, %d refused) against %d swaps in %v", out.ok+out.failed, out.ok, out.failed, r.swaps.Load(), time.Since(start).Round(time.Millisecond))
	if r.swaps.Load() == 0 {
		t.Error("no swap happened: the test raced nothing")
	}
}

// TestOverlayLowerUnderSymlinkSwap: the same attack on the overlay lower
// layer fill (its own fingerprint walk, then the copy into the cache).
func TestOverlayLowerUnderSymlinkSwap(t *testing.T) {
	r := startSwapRace(t)
	const runs = 150
	base := t.TempDir()
	var out raceOutcome
	start := time.Now()
	for i := 0; i < runs && !t.Failed(); i++ {
		cache := filepath.Join(base, fmt.Sprint(i))
		lower, m, err := OverlayLower(context.Background(), cache, r.ws, Options{})
		out.add(t, err)
		if err == nil {
			if full, err := LayerManifest(lower); err == nil {
				m = full
			}
			r.check(t, lower, m)
		}
		r.check(t, cache, Manifest{})
		os.RemoveAll(cache)
	}
	r.halt()
	t.Logf("%d layer fills (%d complete, %d refused) against %d swaps in %v", out.ok+out.failed, out.ok, out.failed, r.swaps.Load(), time.Since(start).Round(time.Millisecond))
	if r.swaps.Load() == 0 {
		t.Error("no swap happened: the test raced nothing")
	}
}
