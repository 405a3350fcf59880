package backend_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// tree builds a workspace and a directory beside it that nothing may
// reach: ws/{a.txt, src/{b.txt, c/d.txt}, fifo, link -> src, etc -> /etc,
// out -> outside}.
func tree(t *testing.T) (ws, outside string) {
	t.Helper()
	ws, outside = t.TempDir(), t.TempDir()
	for _, d := range []string{"src/c"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{"a.txt": "0123456789", "src/b.txt": "b", "src/c/d.txt": "d"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink("src", filepath.Join(ws, "link"))
	os.Symlink("/etc", filepath.Join(ws, "etc"))
	os.Symlink(outside, filepath.Join(ws, "out"))
	return ws, outside
}

func TestWorkspaceDirStat(t *testing.T) {
	ws, _ := tree(t)
	d := backend.WorkspaceDir(ws)
	tests := []struct {
		rel        string
		wantType   backend.FileType
		wantTarget string
		wantCode   job.Code
	}{
		{"", backend.FileDir, "", ""},
		{".", backend.FileDir, "", ""},
		{"a.txt", backend.FileRegular, "", ""},
		{"src", backend.FileDir, "", ""},
		{"etc", backend.FileSymlink, "/etc", ""},
		{"link", backend.FileSymlink, "src", ""},
		{"fifo", backend.FileOther, "", ""},
		{"link/b.txt", "", "", job.CodePathEscape},
		{"etc/passwd", "", "", job.CodePathEscape},
		{"../x", "", "", job.CodePathEscape},
		{"/etc", "", "", job.CodePathEscape},
		{"a\x00b", "", "", job.CodePathEscape},
		{"missing", "", "", job.CodeJobNotFound},
		{"a.txt/x", "", "", job.CodeJobNotFound},
	}
	for _, tt := range tests {
		fi, err := d.Stat(context.Background(), tt.rel)
		if got := job.CodeOf(err); got != tt.wantCode {
			t.Errorf("Stat(%q) = %v, want code %q", tt.rel, err, tt.wantCode)
			continue
		}
		if fi.Type != tt.wantType || fi.SymlinkTarget != tt.wantTarget {
			t.Errorf("Stat(%q) = %s -> %q, want %s -> %q", tt.rel, fi.Type, fi.SymlinkTarget, tt.wantType, tt.wantTarget)
		}
	}
	fi, _ := d.Stat(context.Background(), "a.txt")
	if fi.Name != "a.txt" || fi.Path != "a.txt" || fi.Size != 10 || fi.Mode.Perm() != 0o640 || fi.ModTime.IsZero() {
		t.Errorf("Stat(a.txt) = %+v, want a.txt, 10 bytes, 0640, a time", fi)
	}
}

func TestWorkspaceDirReadDir(t *testing.T) {
	ws, _ := tree(t)
	d := backend.WorkspaceDir(ws)
	entries, truncated, err := d.ReadDir(context.Background(), ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Path+":"+string(e.Type))
	}
	want := []string{"a.txt:file", "etc:symlink", "fifo:other", "link:symlink", "out:symlink", "src:dir"}
	if diff := cmp.Diff(want, got); diff != "" || truncated {
		t.Errorf("ReadDir(.) truncated %v (-want +got)\n%s", truncated, diff)
	}
	entries, truncated, err = d.ReadDir(context.Background(), "src", 1)
	if err != nil || len(entries) != 1 || entries[0].Path != "src/b.txt" || !truncated {
		t.Errorf("ReadDir(src, 1) = %+v, %v, %v; want src/b.txt, truncated", entries, truncated, err)
	}
	for rel, code := range map[string]job.Code{
		"link": job.CodePathEscape, "etc": job.CodePathEscape, "out": job.CodePathEscape, "link/c": job.CodePathEscape,
		"a.txt": job.CodeInvalidRequest, "fifo": job.CodeInvalidRequest, "missing": job.CodeJobNotFound, "..": job.CodePathEscape,
	} {
		if _, _, err := d.ReadDir(context.Background(), rel, 0); job.CodeOf(err) != code {
			t.Errorf("ReadDir(%q) = %v, want %s", rel, err, code)
		}
	}
}

func TestWorkspaceDirReadFileRange(t *testing.T) {
	ws, _ := tree(t)
	os.WriteFile(filepath.Join(ws, "empty"), nil, 0o644)
	d := backend.WorkspaceDir(ws)
	tests := []struct {
		rel      string
		r        backend.ByteRange
		limit    int64
		want     string
		wantSpan backend.FileSpan
		wantCode job.Code
	}{
		{"a.txt", backend.ByteRange{}, -1, "0123456789", backend.FileSpan{Offset: 0, Length: 10, Size: 10}, ""},
		{"a.txt", backend.ByteRange{Start: 2, End: 5}, -1, "234", backend.FileSpan{Offset: 2, Length: 3, Size: 10}, ""},
		{"a.txt", backend.ByteRange{Start: 7}, -1, "789", backend.FileSpan{Offset: 7, Length: 3, Size: 10}, ""},
		{"a.txt", backend.ByteRange{Start: 8, End: 100}, -1, "89", backend.FileSpan{Offset: 8, Length: 2, Size: 10}, ""},
		{"a.txt", backend.ByteRange{Suffix: 4}, -1, "6789", backend.FileSpan{Offset: 6, Length: 4, Size: 10}, ""},
		{"a.txt", backend.ByteRange{Suffix: 40}, -1, "0123456789", backend.FileSpan{Offset: 0, Length: 10, Size: 10}, ""},
		{"a.txt", backend.ByteRange{Start: 10}, -1, "", backend.FileSpan{Offset: 0, Size: 10}, job.CodeRangeNotSatisfiable},
		{"a.txt", backend.ByteRange{Start: 5, End: 3}, -1, "", backend.FileSpan{Offset: 0, Size: 10}, job.CodeRangeNotSatisfiable},
		{"a.txt", backend.ByteRange{Start: 2}, 4, "", backend.FileSpan{Offset: 2, Size: 10}, job.CodeLimitExceeded},
		{"a.txt", backend.ByteRange{Start: 2, End: 6}, 4, "2345", backend.FileSpan{Offset: 2, Length: 4, Size: 10}, ""},
		{"empty", backend.ByteRange{}, -1, "", backend.FileSpan{}, ""},
		{"empty", backend.ByteRange{Start: 1}, -1, "", backend.FileSpan{}, job.CodeRangeNotSatisfiable},
		{"fifo", backend.ByteRange{}, -1, "", backend.FileSpan{}, job.CodeInvalidRequest},
		{"src", backend.ByteRange{}, -1, "", backend.FileSpan{}, job.CodeInvalidRequest},
		{"etc/passwd", backend.ByteRange{}, -1, "", backend.FileSpan{}, job.CodePathEscape},
		{"etc", backend.ByteRange{}, -1, "", backend.FileSpan{}, job.CodePathEscape},
	}
	for _, tt := range tests {
		var b strings.Builder
		span, err := d.ReadFileRange(context.Background(), tt.rel, &b, tt.r, tt.limit)
		if got := job.CodeOf(err); got != tt.wantCode || b.String() != tt.want || span != tt.wantSpan {
			t.Errorf("ReadFileRange(%q, %+v, %d) = %q, %+v, %v; want %q, %+v, code %q", tt.rel, tt.r, tt.limit, b.String(), span, err, tt.want, tt.wantSpan, tt.wantCode)
		}
	}
}

func TestWorkspaceDirRemove(t *testing.T) {
	ws, outside := tree(t)
	d := backend.WorkspaceDir(ws)
	// A loop of directory symlinks and a link out, inside the tree a
	// recursive removal takes.
	os.Symlink("..", filepath.Join(ws, "src/c/up"))
	os.Symlink(outside, filepath.Join(ws, "src/c/out"))
	os.Mkdir(filepath.Join(ws, "empty"), 0o755)
	tests := []struct {
		rel       string
		recursive bool
		wantCode  job.Code
		gone      bool
	}{
		{".", true, job.CodeInvalidRequest, false},
		{"", true, job.CodeInvalidRequest, false},
		{"../x", true, job.CodePathEscape, false},
		{"link/b.txt", false, job.CodePathEscape, false},
		{"src", false, job.CodeDirectoryNotEmpty, false},
		{"missing", false, job.CodeJobNotFound, false},
		{"a.txt", false, "", true},
		{"fifo", false, "", true},
		{"link", false, "", true}, // the link, not src
		{"out", true, "", true},   // the link, not outside
		{"empty", false, "", true},
		{"src", true, "", true},
	}
	for _, tt := range tests {
		err := d.Remove(context.Background(), tt.rel, tt.recursive)
		if got := job.CodeOf(err); got != tt.wantCode {
			t.Errorf("Remove(%q, %v) = %v, want code %q", tt.rel, tt.recursive, err, tt.wantCode)
		}
		if _, err := os.Lstat(filepath.Join(ws, tt.rel)); (tt.gone || tt.wantCode == job.CodeDirectoryNotEmpty) && tt.gone != os.IsNotExist(err) {
			t.Errorf("after Remove(%q): Lstat = %v, want gone %v", tt.rel, err, tt.gone)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "keep" {
		t.Errorf("the file outside = %q, %v; want it kept", b, err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("/etc/passwd: %v", err)
	}
	entries, _ := os.ReadDir(ws)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if diff := cmp.Diff([]string{"etc"}, left); diff != "" {
		t.Errorf("left in the workspace (-want +got)\n%s", diff)
	}
}

func TestWorkspaceDirRename(t *testing.T) {
	ws, outside := tree(t)
	d := backend.WorkspaceDir(ws)
	os.MkdirAll(filepath.Join(ws, "full/x"), 0o755)
	os.Mkdir(filepath.Join(ws, "hollow"), 0o755)
	tests := []struct {
		from, to string
		wantCode job.Code
	}{
		{"a.txt", "new/deep/a.txt", ""},            // parents made
		{"new/deep/a.txt", "src/b.txt", ""},        // a file replaced
		{"src/b.txt", "hollow", ""},                // an empty directory replaced
		{"src", "full", job.CodeDirectoryNotEmpty}, // never a directory with entries
		{"hollow", "full", job.CodeDirectoryNotEmpty},
		{"src", "src/c/inside", job.CodeInvalidRequest},
		{".", "x", job.CodeInvalidRequest},
		{"src", ".", job.CodeInvalidRequest},
		{"missing", "x", job.CodeJobNotFound},
		{"src/c", "link/c2", job.CodePathEscape}, // through a symlink
		{"src/c", "out/c2", job.CodePathEscape},  // out through a symlink
		{"src/c", "etc/c2", job.CodePathEscape},  // into /etc
		{"etc/passwd", "p", job.CodePathEscape},  // from /etc
		{"src/c", "../c2", job.CodePathEscape},
		{"link", "moved-link", ""}, // the link itself moves
		{"fifo", "pipe", ""},
	}
	for _, tt := range tests {
		if err := d.Rename(context.Background(), tt.from, tt.to); job.CodeOf(err) != tt.wantCode {
			t.Errorf("Rename(%q, %q) = %v, want code %q", tt.from, tt.to, err, tt.wantCode)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hollow")); err != nil || string(b) != "0123456789" {
		t.Errorf("hollow = %q, %v; want a.txt's bytes", b, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "moved-link")); err != nil || target != "src" {
		t.Errorf("moved-link -> %q, %v; want src", target, err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("pipe = %v, %v; want the FIFO", fi, err)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside holds %v, want only keep", entries)
	}
	if _, err := os.Lstat("/etc/c2"); err == nil {
		t.Errorf("/etc/c2 exists")
	}
}

// TestWorkspaceDirSymlinkedParent: a parent swapped for a symlink (to
// /etc, or to a directory outside) is never gone through, whichever
// call meets it.
func TestWorkspaceDirSymlinkedParent(t *testing.T) {
	ws, outside := tree(t)
	d := backend.WorkspaceDir(ws)
	os.RemoveAll(filepath.Join(ws, "src"))
	os.Symlink(outside, filepath.Join(ws, "src"))
	ctx := context.Background()
	if _, err := d.Stat(ctx, "src/keep"); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("Stat through the swapped parent = %v", err)
	}
	if err := d.Remove(ctx, "src/keep", false); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("Remove through the swapped parent = %v", err)
	}
	if err := d.Rename(ctx, "src/keep", "kept"); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("Rename from the swapped parent = %v", err)
	}
	if err := d.Rename(ctx, "a.txt", "src/a.txt"); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("Rename into the swapped parent = %v", err)
	}
	if _, _, err := d.ReadDir(ctx, "src", 0); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("ReadDir of the swapped parent = %v", err)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside holds %v, want only keep", entries)
	}
	// The workspace itself swapped for a link is refused too.
	link := filepath.Join(t.TempDir(), "ws")
	os.Symlink(outside, link)
	if _, _, err := backend.WorkspaceDir(link).ReadDir(ctx, ".", 0); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("ReadDir of a symlinked workspace = %v", err)
	}
}

// TestWorkspaceDirMakeDirs: missing directories are made, one already
// there is left, and neither a symlink on the way (to a directory
// inside or outside) nor a file at the place is followed or replaced.
func TestWorkspaceDirMakeDirs(t *testing.T) {
	ws, outside := tree(t)
	d := backend.WorkspaceDir(ws)
	ctx := context.Background()
	if err := d.MakeDirs(ctx, "new/deep/er"); err != nil {
		t.Fatalf("MakeDirs(new/deep/er): %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "new/deep/er")); err != nil || !fi.IsDir() {
		t.Fatalf("new/deep/er after MakeDirs: %v, %v", fi, err)
	}
	if err := d.MakeDirs(ctx, "src/c"); err != nil {
		t.Errorf("MakeDirs of a directory already there: %v", err)
	}
	for _, rel := range []string{"out/made", "link/made", "etc/made", "a.txt/made", "a.txt"} {
		if err := d.MakeDirs(ctx, rel); err == nil {
			t.Errorf("MakeDirs(%s) = nil, want a refusal", rel)
		}
	}
	for _, p := range []string{filepath.Join(outside, "made"), filepath.Join(ws, "src", "made")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was made through a symlink", p)
		}
	}
	if err := d.MakeDirs(ctx, "../escape"); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("MakeDirs(../escape) = %v, want %s", err, job.CodePathEscape)
	}
}
