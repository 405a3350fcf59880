package session_test

import (
	"context"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestPlacedOnWorker: a sandbox placed on a worker is recorded here; a
// record only that worker sends applies, never to an ended record; a
// lost worker's sandboxes end failed with session.worker_lost; a
// restarted service leaves placed sandboxes to their workers.
func TestPlacedOnWorker(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	req := session.CreateRequest{ID: "far", Metadata: map[string]string{"k": "v"}}
	rec, created, err := f.s.Place(req, "w1.a")
	if err != nil || !created || rec.State != session.StateStarting || rec.Worker != "w1.a" {
		t.Fatalf("Place = %+v, %v, %v; want starting on w1.a", rec, created, err)
	}
	if _, created, err := f.s.Place(req, "w1.a"); err != nil || created {
		t.Errorf("Place again = %v, %v; want the same placement", created, err)
	}
	_, _, err = f.s.Place(session.CreateRequest{ID: "far", TimeoutS: 5}, "w2.b")
	wantCode(t, "Place of a taken id with another request", err, job.CodeJobConflict)
	_, _, err = f.s.Create(context.Background(), session.CreateRequest{ID: "far", TimeoutS: 5})
	wantCode(t, "local Create of a placed id", err, job.CodeJobConflict)

	running := rec
	running.State, running.Worker = session.StateRunning, "forged"
	wantCode(t, "Mirror from another worker", f.s.Mirror("w2.b", running), job.CodeJobConflict)
	if got, _ := f.s.Get("far"); got.State != session.StateStarting {
		t.Errorf("after another worker's record: %s, want starting", got.State)
	}
	if err := f.s.Mirror("w1.a", running); err != nil {
		t.Fatalf("Mirror from its worker: %v", err)
	}
	if got, _ := f.s.Get("far"); got.State != session.StateRunning || got.Worker != "w1.a" {
		t.Errorf("after its worker's record: %s on %q, want running on w1.a", got.State, got.Worker)
	}
	if got, ok := f.s.Placed("far"); !ok || got.Worker != "w1.a" {
		t.Errorf("Placed = %+v, %v", got, ok)
	}

	// A new service over the same records (the API node restarted)
	// leaves it live: its worker still holds it.
	again, err := session.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := again.Get("far"); got.State != session.StateRunning {
		t.Errorf("after a restart: %s, want running", got.State)
	}
	if got := again.PlacedWorkers(); len(got) != 1 || got[0] != "w1.a" {
		t.Errorf("PlacedWorkers = %q, want [w1.a]", got)
	}

	lost := f.s.WorkerLost("w1.a", job.Errorf(job.CodeSessionWorkerLost, "gone"))
	if len(lost) != 1 || lost[0] != "far" {
		t.Errorf("WorkerLost = %q, want [far]", lost)
	}
	got, _ := f.s.Get("far")
	if got.State != session.StateFailed || got.Error == nil || got.Error.Code != job.CodeSessionWorkerLost || got.EndedAt == nil {
		t.Errorf("lost worker's sandbox = %s %+v, want failed with %s", got.State, got.Error, job.CodeSessionWorkerLost)
	}
	if err := f.s.Mirror("w1.a", running); err != nil || mustGet(t, f.s, "far").State != session.StateFailed {
		t.Errorf("a late record revived an ended sandbox (%v)", err)
	}
}

// TestUnplace frees an id whose create the worker refused, but never
// one the worker has spoken for.
func TestUnplace(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	if _, _, err := f.s.Place(session.CreateRequest{ID: "refused"}, "w1.a"); err != nil {
		t.Fatal(err)
	}
	f.s.Unplace("refused", "w2.b")
	if _, err := f.s.Get("refused"); err != nil {
		t.Errorf("Unplace by another worker removed it: %v", err)
	}
	f.s.Unplace("refused", "w1.a")
	_, err := f.s.Get("refused")
	wantCode(t, "Get after Unplace", err, job.CodeJobNotFound)

	rec, _, err := f.s.Place(session.CreateRequest{ID: "kept"}, "w1.a")
	if err != nil {
		t.Fatal(err)
	}
	rec.State, rec.UpdatedAt = session.StateRunning, rec.UpdatedAt.Add(1)
	if err := f.s.Mirror("w1.a", rec); err != nil {
		t.Fatal(err)
	}
	f.s.Unplace("kept", "w1.a")
	if got := mustGet(t, f.s, "kept"); got.State != session.StateRunning {
		t.Errorf("Unplace removed a sandbox its worker runs: %s", got.State)
	}
}

func mustGet(t *testing.T, s *session.Service, id string) session.Record {
	t.Helper()
	rec, err := s.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
