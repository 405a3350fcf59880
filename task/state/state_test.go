package state

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// legal is the full transition table of seed 004, written out by hand so
// the test does not restate the code.
var legal = map[State][]State{
	Pending:      {Staging, Failed, Cancelled},
	Staging:      {Provisioning, Failed, Cancelled},
	Provisioning: {Ready, Failed, Cancelled},
	Ready:        {Running, Failed, Cancelled},
	Running:      {Completing, Failed, FailedPreserved, Cancelled},
	Completing:   {Completed, Failed, FailedPreserved, Cancelled},
}

func TestEveryTransition(t *testing.T) {
	for _, from := range All {
		for _, to := range All {
			want := false
			for _, s := range legal[from] {
				want = want || s == to
			}
			if got := Legal(from, to); got != want {
				t.Errorf("Legal(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestLifecycleIsCheckpointed(t *testing.T) {
	dir := t.TempDir()
	m, err := Create(dir, "task-1", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []State{Staging, Provisioning, Ready, Running, Completing, Completed} {
		if err := m.Transition(s, "step "+string(s), nil); err != nil {
			t.Fatalf("-> %s: %v", s, err)
		}
		var rec Record
		b, _ := os.ReadFile(filepath.Join(dir, StateFile))
		if json.Unmarshal(b, &rec) != nil || rec.State != s {
			t.Fatalf("state.json after -> %s: %s", s, b)
		}
	}
	rec := m.Current()
	if rec.StartedAt == nil || rec.EndedAt == nil || !rec.EndedAt.After(rec.CreatedAt) && !rec.EndedAt.Equal(rec.CreatedAt) {
		t.Errorf("timestamps: %+v", rec)
	}
	events := readEvents(t, dir)
	if len(events) != 7 || events[0].To != Pending || events[6].From != Completing || events[6].To != Completed {
		t.Errorf("events = %+v", events)
	}
	for _, e := range events {
		if e.Time.IsZero() || e.TaskID != "task-1" {
			t.Errorf("event without time or task id: %+v", e)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

func TestIllegalTransitionChangesNothing(t *testing.T) {
	dir := t.TempDir()
	m, _ := Create(dir, "task-2", "")
	before, _ := os.ReadFile(filepath.Join(dir, StateFile))
	err := m.Transition(Running, "skip ahead", nil)
	if job.CodeOf(err) != job.CodeJobConflict {
		t.Fatalf("pending -> running = %v, want job.conflict", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, StateFile))
	if string(before) != string(after) || m.Current().State != Pending || len(readEvents(t, dir)) != 1 {
		t.Error("an illegal transition changed the checkpoint")
	}
	m.Transition(Cancelled, "user", job.Errorf(job.CodeRunCanceled, "canceled"))
	for _, s := range All {
		if err := m.Transition(s, "after the end", nil); err == nil {
			t.Errorf("cancelled -> %s allowed", s)
		}
	}
	if m.Current().Error == nil || m.Current().Error.Code != job.CodeRunCanceled {
		t.Errorf("terminal error not recorded: %+v", m.Current())
	}
}

func TestRecoveryFromCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	m, _ := Create(dir, "task-3", "parent-9")
	m.Transition(Staging, "cloning", nil)
	m.Transition(Provisioning, "sandbox", nil)
	for name, corrupt := range map[string][]byte{"torn": []byte(`{"task_id":"task-3","sta`), "garbage": []byte("\x00\xff"), "empty": nil, "bad state": []byte(`{"task_id":"task-3","state":"exploded"}`)} {
		t.Run(name, func(t *testing.T) {
			os.WriteFile(filepath.Join(dir, StateFile), corrupt, 0o644)
			got, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rec := got.Current(); rec.State != Provisioning || rec.TaskID != "task-3" || rec.ParentID != "parent-9" || !strings.Contains(rec.Reason, "recovered") {
				t.Errorf("recovered %+v", rec)
			}
			if again, err := Open(dir); err != nil || again.Current().State != Provisioning {
				t.Errorf("state.json was not rewritten: %v", err)
			}
		})
	}
	// A note keeps the state and is not mistaken for a transition.
	if err := m.Note("workspace_destroyed", "by test"); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, StateFile))
	if got, err := Open(dir); err != nil || got.Current().State != Provisioning {
		t.Errorf("after a note: %+v %v", got, err)
	}
	// A torn last event line is skipped; the one before it counts.
	f, _ := os.OpenFile(filepath.Join(dir, EventsFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-01-01T00:00:00Z","type":"state_change","task_id":"task-3","to":"runn`)
	f.Close()
	os.Remove(filepath.Join(dir, StateFile))
	if got, err := Open(dir); err != nil || got.Current().State != Provisioning {
		t.Errorf("torn event line: %+v %v", got, err)
	}
	// Nothing usable at all is a clear error, not a guess.
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, StateFile), []byte("{"), 0o644)
	if _, err := Open(empty); job.CodeOf(err) != job.CodeRunIOFailed {
		t.Errorf("unrecoverable task = %v", err)
	}
}

func readEvents(t *testing.T, dir string) []Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad event line %q", sc.Text())
		}
		out = append(out, e)
	}
	return out
}

func TestObserverSeesCommittedTransitionsOnly(t *testing.T) {
	m, _ := Create(t.TempDir(), "task-4", "")
	var seen []string
	m.Observe(func(from State, rec Record) { seen = append(seen, string(from)+">"+string(rec.State)) })
	m.Transition(Staging, "", nil)
	m.Transition(Completed, "", nil) // illegal: not observed
	m.Transition(Failed, "", nil)
	if got := strings.Join(seen, " "); got != "pending>staging staging>failed" {
		t.Errorf("observed %q", got)
	}
}
