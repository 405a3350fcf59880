package linuxsandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
)

// Concurrent sandboxes in different host id ranges share one overlay
// lower layer: each may change the layer's files (copied up into its own
// upper layer, owned by its own range) while the layer stays as it was.
func TestSharedOverlayLayerAcrossIDRanges(t *testing.T) {
	b := sandbox(t)
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	lower := filepath.Join(dir, "layer", "tree")
	os.MkdirAll(filepath.Join(lower, "src"), 0o755)
	os.WriteFile(filepath.Join(lower, "src", "data.txt"), []byte("base\n"), 0o644)
	os.Chmod(filepath.Join(dir, "layer"), 0o755)
	const n = 3
	uppers := make([]string, n)
	outs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		job := filepath.Join(dir, "job"+string(rune('a'+i)))
		ws := backend.Workspace{Dir: filepath.Join(job, "merged"), Lower: lower, Upper: filepath.Join(job, "upper"), Work: filepath.Join(job, "work")}
		for _, d := range []string{ws.Dir, ws.Upper, ws.Work} {
			os.MkdirAll(d, 0o755)
		}
		os.Chmod(job, 0o755)
		uppers[i] = ws.Upper
		spec, out, errb := backendtest.Spec(t, "/bin/sh", "-c", "echo job >> src/data.txt && rm -f src/gone && mkdir -p new && echo x > new/f && cat src/data.txt && sleep 0.3")
		spec.Workspace = ws
		wg.Go(func() {
			o, err := b.Run(context.Background(), spec)
			if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
				t.Errorf("job %d: %v %+v %s", i, err, o, errb.String())
			}
			outs[i] = out.String()
		})
	}
	wg.Wait()
	for i, out := range outs {
		if out != "base\njob\n" {
			t.Errorf("job %d saw %q, want its own change only", i, out)
		}
		got, _ := os.ReadFile(filepath.Join(uppers[i], "src", "data.txt"))
		if string(got) != "base\njob\n" {
			t.Errorf("job %d upper layer holds %q", i, got)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(lower, "src", "data.txt")); string(got) != "base\n" {
		t.Errorf("the shared layer changed: %q", got)
	}
	if os.Getuid() == 0 {
		owners := map[uint32]bool{}
		for _, u := range uppers {
			fi, err := os.Stat(filepath.Join(u, "src", "data.txt"))
			if err != nil {
				t.Fatal(err)
			}
			owners[fi.Sys().(*syscall.Stat_t).Uid] = true
		}
		if len(owners) != n {
			t.Errorf("copied-up files of %d jobs have %d distinct owners, want one range each", n, len(owners))
		}
	}
}
