package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"

	"github.com/agent-runner/agent-runner/safecopy"
)

// fingerprintWorkers walk directories in parallel.
const fingerprintWorkers = 4

// fingerprint identifies a workspace state cheaply: a parallel walk that
// lists every directory from root's descriptor (no symlink followed at any
// level: safecopy.Root.ReadDir) and hashes (path, mode, size, mtime,
// inode, link target) in sorted order, plus the include/exclude globs.
// Protected directories are skipped; entries excluded by globs are still
// counted, so the key is conservative (an excluded file changing only
// causes a new layer, never a stale one).
func fingerprint(ctx context.Context, root *safecopy.Root, opt Options) (string, error) {
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
		ents, err := root.ReadDir(rel)
		if err != nil {
			fail(err)
			return
		}
		local := make([]string, 0, len(ents))
		for _, ent := range ents {
			child := ent.Name
			if rel != "." {
				child = rel + "/" + ent.Name
			}
			if Protected(child) {
				continue
			}
			in := ent.Info
			local = append(local, fmt.Sprintf("%s\x00%o\x00%d\x00%d\x00%d\x00%s", child, uint32(in.Mode), in.Size, in.ModTime, in.Ino, ent.Target))
			if in.Mode.IsDir() {
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
	// v3: modes as fs.FileMode, mtimes in nanoseconds (v2 had the raw
	// st_mode and sec.nsec); a layer made under v2 is filled once again.
	fmt.Fprintf(h, "v3\x00%q\x00%q\x00", opt.Include, opt.Exclude)
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:40], nil
}
