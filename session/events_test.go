package session_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/session"
)

// publisher is a fake event bus: it keeps what is published.
type publisher struct {
	mu     sync.Mutex
	events []string
}

func (p *publisher) Publish(kind, id, typ string, payload any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev, ok := payload.(session.Event)
	if !ok {
		return nil // a run's status (RunEvent)
	}
	p.events = append(p.events, kind+" "+typ+" "+ev.SandboxID+" "+string(ev.State))
	return nil
}

// TestStateEvents: every state change is published, kind session, type
// session_state, in order.
func TestStateEvents(t *testing.T) {
	bus := &publisher{}
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Events = bus })
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{ID: "ev"}).ID
	if _, err := f.s.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"session session_state ev starting", "session session_state ev running", "session session_state ev paused",
		"session session_state ev running", "session session_state ev stopped",
	}
	if diff := cmp.Diff(want, bus.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
