package session_test

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestEntries: stat, list, make a directory, move and remove in a
// sandbox's workspace, symlinks reported and handled as themselves,
// never followed.
func TestEntries(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			ctx := context.Background()
			id := f.create(t, session.CreateRequest{}).ID
			for p, data := range map[string]string{"a.txt": "aa", "d/b.txt": "bbb", "d/e/c.txt": "c"} {
				if err := f.s.WriteFile(ctx, id, p, []byte(data), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if res := f.exec(t, id, "ln", "-s", "/etc", "d/link"); res.Status != job.StatusCompleted {
				t.Fatalf("ln -s = %+v", res)
			}

			e, err := f.s.StatEntry(ctx, id, "d/b.txt")
			if err != nil || e.Type != "file" || e.Size != 3 || e.Mode.Perm() != 0o640 || e.Path != "d/b.txt" {
				t.Errorf("StatEntry(d/b.txt) = %+v, %v", e, err)
			}
			if e, err := f.s.StatEntry(ctx, id, "d/link"); err != nil || e.Type != "symlink" || e.Target != "/etc" {
				t.Errorf("StatEntry(d/link) = %+v, %v; want the symlink itself", e, err)
			}
			_, err = f.s.StatEntry(ctx, id, "nope")
			wantCode(t, "StatEntry(nope)", err, job.CodeJobNotFound)
			_, err = f.s.StatEntry(ctx, id, "d/link/passwd")
			wantCode(t, "StatEntry through a symlink", err, job.CodePathEscape)

			list := func(rel string, depth int) []string {
				t.Helper()
				es, err := f.s.ListEntries(ctx, id, rel, depth)
				if err != nil {
					t.Fatalf("ListEntries(%q, %d) = %v", rel, depth, err)
				}
				var out []string
				for _, e := range es {
					out = append(out, e.Path+":"+e.Type)
				}
				sort.Strings(out)
				return out
			}
			if got, want := list("d", 1), []string{"d/b.txt:file", "d/e:dir", "d/link:symlink"}; !cmp.Equal(got, want) {
				t.Errorf("ListEntries(d, 1) = %v, want %v", got, want)
			}
			if got, want := list(".", 3), []string{"a.txt:file", "d/b.txt:file", "d/e/c.txt:file", "d/e:dir", "d/link:symlink", "d:dir"}; !cmp.Equal(got, want) {
				t.Errorf("ListEntries(., 3) = %v, want %v", got, want)
			}
			_, err = f.s.ListEntries(ctx, id, "d/link", 1)
			wantCode(t, "ListEntries of a symlink", err, job.CodePathEscape)

			if e, created, err := f.s.MakeDirEntry(ctx, id, "n/m"); err != nil || !created || e.Type != "dir" {
				t.Errorf("MakeDirEntry(n/m) = %+v, %v, %v; want created", e, created, err)
			}
			if _, created, err := f.s.MakeDirEntry(ctx, id, "n/m"); err != nil || created {
				t.Errorf("MakeDirEntry(n/m) again = %v, %v; want not created", created, err)
			}
			if e, err := f.s.MoveEntry(ctx, id, "a.txt", "n/m/x/moved.txt"); err != nil || e.Path != "n/m/x/moved.txt" || e.Size != 2 {
				t.Errorf("MoveEntry = %+v, %v", e, err)
			}
			if e, err := f.s.MoveEntry(ctx, id, "d/link", "kept-link"); err != nil || e.Type != "symlink" {
				t.Errorf("MoveEntry of a symlink = %+v, %v; want the symlink moved", e, err)
			}
			if err := f.s.RemoveEntry(ctx, id, "kept-link"); err != nil {
				t.Errorf("RemoveEntry(kept-link) = %v", err)
			}
			if res := f.exec(t, id, "test", "-f", "/etc/passwd"); res.Status != job.StatusCompleted {
				t.Errorf("removing a symlink reached its target: %+v", res)
			}
			if err := f.s.RemoveEntry(ctx, id, "d"); err != nil {
				t.Errorf("RemoveEntry(d) = %v", err)
			}
			if got, want := list(".", 4), []string{"n/m/x/moved.txt:file", "n/m/x:dir", "n/m:dir", "n:dir"}; !cmp.Equal(got, want) {
				t.Errorf("after the moves and removes: %v, want %v", got, want)
			}
			wantCode(t, "RemoveEntry(nope)", f.s.RemoveEntry(ctx, id, "nope"), job.CodeJobNotFound)
			wantCode(t, "RemoveEntry(.)", f.s.RemoveEntry(ctx, id, "."), job.CodePathEscape)
			wantCode(t, "RemoveEntry(../x)", f.s.RemoveEntry(ctx, id, "../x"), job.CodePathEscape)

			if _, err := f.s.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.StatEntry(ctx, id, "n"); err != nil {
				t.Errorf("StatEntry while paused = %v", err)
			}
			_, _, err = f.s.MakeDirEntry(ctx, id, "p")
			wantCode(t, "MakeDirEntry while paused", err, job.CodeSessionNotRunning)
		})
	}
}
