package session_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// hostileTree is what a sandbox's own processes leave for the host's
// file calls: links to /etc and up the tree, a FIFO, a loop of
// directory symlinks under a directory a recursive removal takes.
const hostileTree = `mkdir -p src/c loop/x && printf 0123456789 > a.txt && echo b > src/b.txt &&
ln -s /etc etc && ln -s src link && mkfifo fifo &&
ln -s .. loop/x/up && ln -s ../loop loop/self && ln -s /etc loop/x/etc`

// TestFileTree: listing, stat, ranged reads, removal and moves through
// the service on every backend, against a tree the sandbox built to
// mislead them; writes made by the host stay usable by the sandbox's
// user (a root runner's linux_sandbox maps it).
func TestFileTree(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			ctx := context.Background()
			id := f.create(t, session.CreateRequest{}).ID
			if res := f.exec(t, id, "sh", "-c", hostileTree); res.ExitCode == nil || *res.ExitCode != 0 {
				t.Fatalf("building the tree: %+v", res)
			}

			list, err := f.s.ListFiles(ctx, id, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range list.Entries {
				got = append(got, e.Path+":"+string(e.Type))
			}
			want := []string{"a.txt:file", "etc:symlink", "fifo:other", "link:symlink", "loop:dir", "src:dir"}
			if diff := cmp.Diff(want, got); diff != "" || list.Path != "." || list.Truncated {
				t.Errorf("ListFiles(\"\") = %s truncated %v (-want +got)\n%s", list.Path, list.Truncated, diff)
			}
			if list.Entries[0].Size != 10 || list.Entries[0].Mode == "" || list.Entries[0].ModifiedAt.IsZero() {
				t.Errorf("a.txt = %+v, want 10 bytes, a mode and a time", list.Entries[0])
			}
			st, err := f.s.StatFile(ctx, id, "etc")
			if err != nil || st.Type != backend.FileSymlink || st.SymlinkTarget != "/etc" {
				t.Errorf("StatFile(etc) = %+v, %v; want a symlink to /etc", st, err)
			}
			var buf bytes.Buffer
			span, err := f.s.ReadFileRange(ctx, id, "a.txt", backend.ByteRange{Start: 2, End: 5}, &buf)
			if err != nil || buf.String() != "234" || span != (backend.FileSpan{Offset: 2, Length: 3, Size: 10}) {
				t.Errorf("ReadFileRange(a.txt, 2-4) = %q, %+v, %v; want 234", buf.String(), span, err)
			}
			_, err = f.s.ReadFileRange(ctx, id, "a.txt", backend.ByteRange{Start: 10}, &buf)
			wantCode(t, "a range past the end", err, job.CodeRangeNotSatisfiable)

			for _, p := range []string{"etc", "etc/passwd", "link/b.txt", "../etc", "/etc", "a\x01"} {
				_, err := f.s.ListFiles(ctx, id, p)
				wantCode(t, "ListFiles "+p, err, job.CodePathEscape)
			}
			for _, p := range []string{"etc/passwd", "link/b.txt", "../x", "/etc/passwd"} {
				_, err := f.s.StatFile(ctx, id, p)
				wantCode(t, "StatFile "+p, err, job.CodePathEscape)
				wantCode(t, "RemoveFile "+p, f.s.RemoveFile(ctx, id, p, true), job.CodePathEscape)
				wantCode(t, "MoveFile from "+p, f.s.MoveFile(ctx, id, p, "moved"), job.CodePathEscape)
				wantCode(t, "MoveFile to "+p, f.s.MoveFile(ctx, id, "src/b.txt", p), job.CodePathEscape)
			}
			_, err = f.s.ReadFileRange(ctx, id, "fifo", backend.ByteRange{}, &buf)
			wantCode(t, "reading a FIFO", err, job.CodeInvalidRequest)
			wantCode(t, "ReadFile of a FIFO", f.s.ReadFile(ctx, id, "fifo", &buf), job.CodeInvalidRequest)
			wantCode(t, "removing the root", f.s.RemoveFile(ctx, id, ".", true), job.CodeInvalidRequest)
			wantCode(t, "removing a directory with entries", f.s.RemoveFile(ctx, id, "src", false), job.CodeDirectoryNotEmpty)
			if err := f.s.RemoveFile(ctx, id, "loop", true); err != nil {
				t.Errorf("RemoveFile(loop, recursive) = %v", err)
			}
			if err := f.s.RemoveFile(ctx, id, "etc", false); err != nil {
				t.Errorf("RemoveFile(etc) = %v", err)
			}
			if _, err := os.Stat("/etc/passwd"); err != nil {
				t.Fatalf("/etc/passwd after the removals: %v", err)
			}
			if err := f.s.MoveFile(ctx, id, "a.txt", "new/deep/a.txt"); err != nil {
				t.Errorf("MoveFile(a.txt, new/deep/a.txt) = %v", err)
			}
			// The sandbox's user owns the parents the move made, and can
			// write in them.
			res := f.exec(t, id, "sh", "-c", "test -O new/deep && cat new/deep/a.txt && echo more > new/deep/more && ls")
			if res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "0123456789fifo\nlink\nnew\nsrc\n" {
				t.Errorf("after the move: %+v", res)
			}
			// A parent swapped for a symlink to /etc by the sandbox.
			f.exec(t, id, "sh", "-c", "rm -r src && ln -s /etc src")
			_, err = f.s.StatFile(ctx, id, "src/passwd")
			wantCode(t, "StatFile through a swapped parent", err, job.CodePathEscape)
			wantCode(t, "RemoveFile through a swapped parent", f.s.RemoveFile(ctx, id, "src/passwd", false), job.CodePathEscape)

			if _, err := f.s.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.ListFiles(ctx, id, "new"); err != nil {
				t.Errorf("ListFiles while paused = %v", err)
			}
			if _, err := f.s.StatFile(ctx, id, "new/deep/a.txt"); err != nil {
				t.Errorf("StatFile while paused = %v", err)
			}
			if _, err := f.s.ReadFileRange(ctx, id, "new/deep/a.txt", backend.ByteRange{Suffix: 2}, &buf); err != nil {
				t.Errorf("ReadFileRange while paused = %v", err)
			}
			wantCode(t, "RemoveFile while paused", f.s.RemoveFile(ctx, id, "new", true), job.CodeSessionNotRunning)
			wantCode(t, "MoveFile while paused", f.s.MoveFile(ctx, id, "new", "old"), job.CodeSessionNotRunning)
			if _, err := f.s.Delete(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			_, err = f.s.StatFile(ctx, id, "new")
			wantCode(t, "StatFile after Delete", err, job.CodeSessionNotRunning)
			wantCode(t, "MoveFile after Delete", f.s.MoveFile(ctx, id, "new", "old"), job.CodeSessionNotRunning)
		})
	}
}
