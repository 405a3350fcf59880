package session_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/session"
)

// TestWatchEntries: a recursive watch reports files created, written,
// renamed and removed, in a directory created after it started too, and
// ends when its sandbox does.
func TestWatchEntries(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{}).ID
	if _, err := f.s.MakeDir(ctx, id, "w"); err != nil {
		t.Fatal(err)
	}
	events := make(chan session.EntryEvent, 100)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- f.s.WatchEntries(ctx, id, "w", true, func() error { close(started); return nil }, func(e session.EntryEvent) error {
			events <- e
			return nil
		})
	}()
	<-started
	f.exec(t, id, "sh", "-c", "echo a > w/a.txt; mkdir w/sub; sleep 0.2; echo b > w/sub/b.txt; mv w/a.txt w/c.txt; rm w/sub/b.txt")
	want := []session.EntryEvent{
		{Op: "create", Path: "a.txt"}, {Op: "write", Path: "a.txt"}, {Op: "create", Path: "sub"},
		{Op: "create", Path: "sub/b.txt"}, {Op: "rename", Path: "a.txt"}, {Op: "create", Path: "c.txt"}, {Op: "remove", Path: "sub/b.txt"},
	}
	var got []session.EntryEvent
	deadline := time.After(20 * time.Second)
	for missing(want, got) {
		select {
		case e := <-events:
			got = append(got, e)
		case <-deadline:
			t.Fatalf("events = %v, want all of %v", got, want)
		}
	}
	if _, err := f.s.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchEntries ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not end with its sandbox")
	}
}

// missing reports whether got lacks one of want.
func missing(want, got []session.EntryEvent) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return true
		}
	}
	return false
}
