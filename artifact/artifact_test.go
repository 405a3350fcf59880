package artifact

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

func workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func paths(as []job.Artifact) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.Path)
	}
	return out
}

func TestCollectAcceptsAndRefuses(t *testing.T) {
	ws := workspace(t, map[string]string{
		"coverage.xml": "<cov/>", "test-results/a.xml": "a", "test-results/sub/b.xml": "b",
		"test-results/.env": "SECRET", "test-results/key.pem": "k", "test-results/skip.log": "l", "other.txt": "o",
	})
	os.Symlink("/etc/passwd", filepath.Join(ws, "test-results", "passwd"))
	os.Symlink("../coverage.xml", filepath.Join(ws, "test-results", "inside-link"))
	dest := t.TempDir()
	res, err := Collect(context.Background(), []string{ws}, []string{"coverage.xml", "test-results/**"}, []string{"**/*.log"}, Limits{}, dest)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"coverage.xml", "test-results/a.xml", "test-results/sub/b.xml"}, paths(res.Artifacts)); diff != "" {
		t.Errorf("collected (-want +got):\n%s", diff)
	}
	denied := strings.Join(res.Denied, "\n")
	for _, want := range []string{"test-results/.env: protected", "test-results/key.pem: protected", "test-results/skip.log: matches artifact_deny_globs", "test-results/passwd: symlinks", "test-results/inside-link: symlinks"} {
		if !strings.Contains(denied, want) {
			t.Errorf("denied list lacks %q:\n%s", want, denied)
		}
	}
	a := res.Artifacts[0]
	b, err := os.ReadFile(filepath.Join(dest, "coverage.xml"))
	if err != nil || string(b) != "<cov/>" || a.SizeBytes != 6 || a.SHA256 != job.SHA256Hex([]byte("<cov/>")) {
		t.Errorf("artifact = %+v, copy = %q %v", a, b, err)
	}
	if !strings.HasPrefix(a.StorageURI, "file:///") || !strings.HasSuffix(a.StorageURI, "/coverage.xml") {
		t.Errorf("storage_uri = %q", a.StorageURI)
	}
}

// TestCollectCaps: the caps select what is collected and list the rest;
// they are never an error (a passing run with a large report stayed
// policy_denied before).
func TestCollectCaps(t *testing.T) {
	ws := workspace(t, map[string]string{"a.out": "12345", "b.out": "1234567", "c.out": "12345"})
	tests := []struct {
		name    string
		lim     Limits
		want    []string
		skipped []job.SkippedArtifact
	}{
		{"count", Limits{MaxCount: 2}, []string{"a.out", "b.out"},
			[]job.SkippedArtifact{{Path: "c.out", Reason: job.SkipMaxArtifactCount, SizeBytes: 5, Limit: 2}}},
		{"per file", Limits{MaxFileBytes: 5}, []string{"a.out", "c.out"},
			[]job.SkippedArtifact{{Path: "b.out", Reason: job.SkipMaxArtifactFileBytes, SizeBytes: 7, Limit: 5}}},
		{"total: a smaller file after a skipped one still fits", Limits{MaxBytes: 11}, []string{"a.out", "c.out"},
			[]job.SkippedArtifact{{Path: "b.out", Reason: job.SkipMaxArtifactBytes, SizeBytes: 7, Limit: 11}}},
		{"exactly at the caps", Limits{MaxCount: 3, MaxFileBytes: 7, MaxBytes: 17}, []string{"a.out", "b.out", "c.out"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := t.TempDir()
			res, err := Collect(context.Background(), []string{ws}, []string{"*.out"}, nil, tt.lim, dest)
			if err != nil {
				t.Fatalf("Collect = %v, want no error", err)
			}
			if diff := cmp.Diff(tt.want, paths(res.Artifacts)); diff != "" {
				t.Errorf("collected (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.skipped, res.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			for _, s := range res.Skipped {
				if _, err := os.Stat(filepath.Join(dest, s.Path)); err == nil {
					t.Errorf("skipped %s is in the run record", s.Path)
				}
			}
		})
	}
}

func TestCollectNoGlobs(t *testing.T) {
	ws := workspace(t, map[string]string{"a": "a"})
	res, err := Collect(context.Background(), []string{ws}, nil, nil, Limits{}, t.TempDir())
	if err != nil || res.Artifacts == nil || len(res.Artifacts) != 0 {
		t.Errorf("no globs = %+v, %v; want an empty, non-nil list", res, err)
	}
}

func TestCollectLayers(t *testing.T) {
	lower := workspace(t, map[string]string{"r/keep.txt": "lower", "r/over.txt": "lower", "r/gone.txt": "lower"})
	upper := workspace(t, map[string]string{"r/over.txt": "upper", "r/new.txt": "new"})
	if os.Getuid() == 0 {
		// A whiteout is a 0/0 character device (needs CAP_MKNOD).
		if err := mknodWhiteout(filepath.Join(upper, "r", "gone.txt")); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Collect(context.Background(), []string{upper, lower}, []string{"r/*"}, nil, Limits{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"r/keep.txt", "r/new.txt", "r/over.txt"}
	if os.Getuid() != 0 {
		want = []string{"r/gone.txt", "r/keep.txt", "r/new.txt", "r/over.txt"}
	}
	if diff := cmp.Diff(want, paths(res.Artifacts)); diff != "" {
		t.Errorf("layered collection (-want +got):\n%s", diff)
	}
	for _, a := range res.Artifacts {
		if a.Path == "r/over.txt" && a.SHA256 != job.SHA256Hex([]byte("upper")) {
			t.Errorf("r/over.txt came from the lower layer")
		}
	}
}

// TestCopyFileThatGrew covers a file that grows between the scan and the
// copy (a process the job left behind keeps writing): neither the per-file
// nor the total cap may be passed, and nothing partial stays behind.
func TestCopyFileThatGrew(t *testing.T) {
	tests := []struct {
		name  string
		lim   Limits
		want  []string // collected
		limit int64    // the cap b.out grew past
	}{
		{"per-file cap", Limits{MaxFileBytes: 10}, []string{"a.out"}, 10},
		{"total cap", Limits{MaxBytes: 15}, []string{"a.out"}, 10},
		{"total cap already spent", Limits{MaxBytes: 5}, []string{"a.out"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := workspace(t, map[string]string{"a.out": "12345", "b.out": ""})
			roots, files := scan(t, ws, "*.out")
			// b.out was empty when scanned and has 50 bytes when copied.
			if err := os.WriteFile(filepath.Join(ws, "b.out"), []byte(strings.Repeat("g", 50)), 0o644); err != nil {
				t.Fatal(err)
			}
			dest := t.TempDir()
			c, err := copyAll(context.Background(), roots, files, tt.lim, dest)
			if err != nil {
				t.Fatalf("copy = %v, want no error (the grown file is skipped)", err)
			}
			if diff := cmp.Diff(tt.want, paths(c.artifacts)); diff != "" {
				t.Errorf("collected (-want +got):\n%s", diff)
			}
			want := []job.SkippedArtifact{{Path: "b.out", Reason: job.SkipGrewPastCap, Limit: tt.limit}}
			if diff := cmp.Diff(want, c.skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(dest, "b.out")); err == nil {
				t.Error("a partial copy of the grown file was left in the run record")
			}
		})
	}
}
