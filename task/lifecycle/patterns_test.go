package lifecycle

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
)

// collectWithin runs collectPatterns and fails the test if it has not
// returned after 10 s (a FIFO opened without O_NONBLOCK never returns).
func collectWithin(t *testing.T, l stage.Layout, tk *manifest.Task, caps artifactCaps) ([]stage.Artifact, []string) {
	t.Helper()
	type result struct {
		arts    []stage.Artifact
		skipped []string
	}
	done := make(chan result, 1)
	go func() {
		a, s := collectPatterns(context.Background(), l, tk, caps)
		done <- result{a, s}
	}()
	select {
	case r := <-done:
		return r.arts, r.skipped
	case <-time.After(10 * time.Second):
		t.Fatal("collectPatterns still blocked after 10 s")
		return nil, nil
	}
}

func writeFile(t *testing.T, p string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Sparse: size bytes to read, no blocks on disk.
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
}

func names(arts []stage.Artifact) []string {
	var out []string
	for _, a := range arts {
		out = append(out, a.Name)
	}
	return out
}

// TestCollectPatternsCapsAndSpecialFiles: an agent leaves a sparse 8 GiB
// file, files that together pass the total cap, a FIFO, a /dev/zero twin
// and a link to a host directory under names the patterns match. The old
// copy had no cap (the 8 GiB were written to the host's disk); now only
// regular files within both caps are copied, the rest is listed as
// skipped, and nothing blocks.
func TestCollectPatternsCapsAndSpecialFiles(t *testing.T) {
	l := stage.Layout{Dir: t.TempDir()}
	r := filepath.Join(l.Inbox(), "reports")
	writeFile(t, filepath.Join(r, "a.bin"), 600<<10)
	writeFile(t, filepath.Join(r, "b.bin"), 600<<10)
	writeFile(t, filepath.Join(r, "big.bin"), 8<<30)
	writeFile(t, filepath.Join(r, "ok.json"), 2)
	writeFile(t, filepath.Join(l.Inbox(), ".git", "reports", "x.json"), 1)
	if err := syscall.Mkfifo(filepath.Join(r, "pipe.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(r, "zero.json"), syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		t.Logf("mknod is not permitted here (%v): the device case is not run", err)
	}
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.json"), 5)
	if err := os.Symlink(outside, filepath.Join(r, "host")); err != nil {
		t.Fatal(err)
	}
	tk := &manifest.Task{}
	tk.Lifecycle.ArtifactPatterns = []string{"reports/**", "**/x.json"}
	caps := artifactCaps{file: 1 << 20, total: 1 << 20}

	arts, skipped := collectWithin(t, l, tk, caps)
	if diff := cmp.Diff([]string{"files/reports/a.bin", "files/reports/ok.json"}, names(arts)); diff != "" {
		t.Errorf("collected (-want +got):\n%s", diff)
	}
	var skippedNames []string
	for _, s := range skipped {
		skippedNames = append(skippedNames, s[:strings.Index(s, ":")])
	}
	if diff := cmp.Diff([]string{"files/reports/b.bin", "files/reports/big.bin"}, skippedNames); diff != "" {
		t.Errorf("skipped (-want +got):\n%s\n%s", diff, strings.Join(skipped, "\n"))
	}
	var total int64
	filepath.Walk(l.Artifacts(), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		if !fi.Mode().IsRegular() || fi.Size() > caps.file {
			t.Errorf("outbox holds %s: %v, %d bytes", p, fi.Mode(), fi.Size())
		}
		total += fi.Size()
		return nil
	})
	if total > caps.total {
		t.Errorf("outbox holds %d bytes, over the total cap %d", total, caps.total)
	}
}

// TestCollectPatternsSubpathLink: the agent replaces repository.subpath
// with a link to a host directory; the old os.OpenRoot followed it and
// copied the host's files.
func TestCollectPatternsSubpathLink(t *testing.T) {
	l := stage.Layout{Dir: t.TempDir()}
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "reports", "secret.json"), 5)
	if err := os.MkdirAll(l.Inbox(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(l.Inbox(), "sub")); err != nil {
		t.Fatal(err)
	}
	tk := &manifest.Task{}
	tk.Repository.Subpath = "sub"
	tk.Lifecycle.ArtifactPatterns = []string{"reports/*"}
	arts, skipped := collectWithin(t, l, tk, artifactCaps{file: 1 << 20, total: 1 << 20})
	if len(arts) != 0 {
		t.Errorf("collected %v through sub -> %s", names(arts), outside)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "symlink") {
		t.Errorf("skipped = %q, want the symlinked workdir named", skipped)
	}
}

// TestNoteSkipped: every skipped artifact is an artifact_skipped event, up
// to maxSkipNotes, and one more event counts the rest.
func TestNoteSkipped(t *testing.T) {
	dir := t.TempDir()
	m, err := state.Create(dir, "task-notes", "")
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for i := range maxSkipNotes + 5 {
		skipped = append(skipped, "files/f"+string(rune('a'+i))+": too large")
	}
	noteSkipped(m, slog.New(slog.DiscardHandler), skipped)
	f, err := os.Open(filepath.Join(dir, state.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev state.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "artifact_skipped" {
			got = append(got, ev.Reason)
		}
	}
	want := append(skipped[:maxSkipNotes:maxSkipNotes], "5 more artifacts skipped")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("artifact_skipped events (-want +got):\n%s", diff)
	}
}

func TestArtifactCapsDefaults(t *testing.T) {
	tests := []struct {
		cfg  Config
		want artifactCaps
	}{
		{Config{}, artifactCaps{DefaultMaxArtifactFileBytes, DefaultMaxArtifactBytes}},
		{Config{MaxArtifactFileBytes: 5, MaxArtifactBytes: 7}, artifactCaps{5, 7}},
		{Config{MaxArtifactFileBytes: -1}, artifactCaps{DefaultMaxArtifactFileBytes, DefaultMaxArtifactBytes}},
	}
	for _, tt := range tests {
		if got := tt.cfg.artifactCaps(); got != tt.want {
			t.Errorf("Config{MaxArtifactFileBytes: %d, MaxArtifactBytes: %d}.artifactCaps() = %+v, want %+v",
				tt.cfg.MaxArtifactFileBytes, tt.cfg.MaxArtifactBytes, got, tt.want)
		}
	}
}
