package session_test

import (
	"context"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestMakeDir: a directory and its parents are made, once; a file in
// the way is job.conflict, a symlink on the way path_escape, and a
// paused sandbox makes none.
func TestMakeDir(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			ctx := context.Background()
			id := f.create(t, session.CreateRequest{}).ID
			if created, err := f.s.MakeDir(ctx, id, "a/b/c"); err != nil || !created {
				t.Errorf("MakeDir(a/b/c) = %v, %v; want created", created, err)
			}
			if e, err := f.s.StatFile(ctx, id, "a/b/c"); err != nil || e.Type != "dir" {
				t.Errorf("StatFile(a/b/c) = %+v, %v; want a directory", e, err)
			}
			if created, err := f.s.MakeDir(ctx, id, "a/b"); err != nil || created {
				t.Errorf("MakeDir(a/b) again = %v, %v; want not created", created, err)
			}
			if err := f.s.WriteFile(ctx, id, "file", []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := f.s.MakeDir(ctx, id, "file")
			wantCode(t, "MakeDir over a file", err, job.CodeJobConflict)
			if res := f.exec(t, id, "ln", "-s", "/tmp", "link"); res.Status != job.StatusCompleted {
				t.Fatalf("ln -s = %+v", res)
			}
			_, err = f.s.MakeDir(ctx, id, "link/x")
			wantCode(t, "MakeDir through a symlink", err, job.CodePathEscape)
			_, err = f.s.MakeDir(ctx, id, "../out")
			wantCode(t, "MakeDir(../out)", err, job.CodePathEscape)
			if _, err := f.s.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
			_, err = f.s.MakeDir(ctx, id, "p")
			wantCode(t, "MakeDir while paused", err, job.CodeSessionNotRunning)
		})
	}
}
