package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// fingerprintWorkers walk directories in parallel.
const fingerprintWorkers = 4

// fingerprint identifies a workspace state cheaply: a parallel walk that
// stats every entry relative to its directory's descriptor (fstatat, no
// full path resolution) and hashes (path, mode, size, mtime, inode, link
// target) in sorted order, plus the include/exclude globs. Protected
// directories are skipped; entries excluded by globs are still counted, so
// the key is conservative (an excluded file changing only causes a new
// layer, never a stale one).
func fingerprint(ctx context.Context, src string, opt Options) (string, error) {
	var (
		mu      sync.Mutex
		lines   []string
		firstEr error
		wg      sync.WaitGroup
	)
	dirs := make(chan string, 1024)
	var pending sync.WaitGroup
	fail := func(err error) {
		mu.Lock()
		if firstEr == nil {
			firstEr = err
		}
		mu.Unlock()
	}
	visit := func(rel string) {
		defer pending.Done()
		if ctx.Err() != nil {
			fail(ctx.Err())
			return
		}
		full := src
		if rel != "." {
			full = src + "/" + rel
		}
		f, err := os.Open(full)
		if err != nil {
			fail(err)
			return
		}
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil {
			fail(err)
			return
		}
		fd := int(f.Fd())
		local := make([]string, 0, len(names))
		for _, name := range names {
			child := name
			if rel != "." {
				child = rel + "/" + name
			}
			if Protected(child) {
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				fail(err)
				return
			}
			target := ""
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				buf := make([]byte, 4096)
				if n, err := unix.Readlinkat(fd, name, buf); err == nil {
					target = string(buf[:n])
				}
			}
			local = append(local, fmt.Sprintf("%s\x00%o\x00%d\x00%d.%d\x00%d\x00%s", child, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ino, target))
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				pending.Add(1)
				select {
				case dirs <- child:
				default:
					// The queue is full: hand it over without blocking this worker.
					go func(c string) { dirs <- c }(child)
				}
			}
		}
		mu.Lock()
		lines = append(lines, local...)
		mu.Unlock()
	}
	for i := 0; i < fingerprintWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rel := range dirs {
				visit(rel)
			}
		}()
	}
	pending.Add(1)
	dirs <- "."
	pending.Wait()
	close(dirs)
	wg.Wait()
	if firstEr != nil {
		return "", firstEr
	}
	sort.Strings(lines)
	h := sha256.New()
	fmt.Fprintf(h, "v2\x00%q\x00%q\x00", opt.Include, opt.Exclude)
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:40], nil
}
