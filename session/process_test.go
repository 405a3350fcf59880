package session_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// errSeen stops a follow once the output holds what a test waits for.
var errSeen = errors.New("seen")

// follow reads process pid's events from offset from until its stdout
// and stderr together contain every want (with none: until it exited), and returns
// the events and the offset to resume from.
func follow(t *testing.T, f *fixture, id string, pid int, from int64, want ...string) ([]session.ProcessEvent, int64) {
	t.Helper()
	var evs []session.ProcessEvent
	var text strings.Builder
	err := f.s.FollowProcess(context.Background(), id, pid, from, func(ev session.ProcessEvent) error {
		evs = append(evs, ev)
		from = ev.Offset
		if o, ok := ev.Data.(session.OutputEvent); ok {
			text.WriteString(o.Data)
		}
		if len(want) > 0 && containsAll(text.String(), want) {
			return errSeen
		}
		return nil
	})
	if err != nil && !errors.Is(err, errSeen) {
		t.Fatalf("FollowProcess(%d, from %d) = %v", pid, from, err)
	}
	if !containsAll(text.String(), want) {
		t.Fatalf("process %d's output from there is %q; want it to contain %q", pid, text.String(), want)
	}
	return evs, from
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// types lists the events' types.
func types(evs []session.ProcessEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// TestProcessLifecycle: a background process reads its stdin, its
// output is streamed with offsets (start first), a reader resuming from
// an offset gets only what follows, a resize without a pty is
// session.no_terminal, and a kill ends it canceled, recorded as a run
// of the sandbox, with an exit event last.
func TestProcessLifecycle(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			id := f.create(t, session.CreateRequest{}).ID
			ctx := context.Background()
			info, err := f.s.StartProcess(ctx, id, session.ProcessRequest{
				Argv: []string{"sh", "-c", `read line; echo "got $line"; read again; echo "then $again"; echo oops >&2; sleep 100`},
				Tag:  "worker",
			})
			if err != nil || info.PID <= 0 || info.State != session.ProcessRunning || info.RunID != id+".proc-1" || info.Tag != "worker" {
				t.Fatalf("StartProcess = %+v, %v; want running %s.proc-1 tagged worker", info, err, id)
			}
			if err := f.s.WriteStdin(ctx, id, info.PID, []byte("hi\n"), false); err != nil {
				t.Fatal(err)
			}
			evs, mid := follow(t, f, id, info.PID, 0, "got hi")
			if got := types(evs); got[0] != "start" || !strings.Contains(strings.Join(got, " "), "stdout") {
				t.Errorf("events from 0 = %v; want start first, then stdout", got)
			}
			if err := f.s.WriteStdin(ctx, id, info.PID, []byte("there\n"), false); err != nil {
				t.Fatal(err)
			}
			evs, _ = follow(t, f, id, info.PID, mid, "then there", "oops")
			for _, ev := range evs {
				if o, ok := ev.Data.(session.OutputEvent); !ok || o.Offset < mid || strings.Contains(o.Data, "got hi") {
					t.Errorf("event after offset %d = %s %+v; want only output after it", mid, ev.Type, ev.Data)
				}
			}
			wantCode(t, "resize without a pty", f.s.ResizeProcess(id, info.PID, session.PtySize{Cols: 100, Rows: 30}), job.CodeSessionNoTerminal)
			list, err := f.s.Processes(id)
			if err != nil || len(list) != 1 || list[0].PID != info.PID || list[0].State != session.ProcessRunning {
				t.Errorf("Processes = %+v, %v; want pid %d running", list, err, info.PID)
			}
			got, err := f.s.KillProcess(ctx, id, info.PID)
			if err != nil || got.State != session.ProcessExited || got.Status != job.StatusCanceled || got.EndedAt == nil {
				t.Fatalf("KillProcess = %+v, %v; want exited, canceled", got, err)
			}
			evs, _ = follow(t, f, id, info.PID, got.OutputBytes)
			if len(evs) != 1 || evs[0].Type != "exit" {
				t.Errorf("events after the end = %v; want [exit]", types(evs))
			}
			res, err := f.r.Store().ReadResult(info.RunID)
			if err != nil || res.Sandbox != id || res.Status != job.StatusCanceled {
				t.Errorf("run %s = sandbox %q status %s, %v; want %s canceled", info.RunID, res.Sandbox, res.Status, err, id)
			}
			wantCode(t, "signal an exited process", f.s.SignalProcess(id, info.PID, syscall.SIGTERM), job.CodeSessionNotRunning)
			_, err = f.s.Process(id, info.PID+100000)
			wantCode(t, "an unknown pid", err, job.CodeJobNotFound)
		})
	}
}

// TestProcessExitCode: a process that ends by itself is listed exited
// with its exit code; its exit event carries it.
func TestProcessExitCode(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	id := f.create(t, session.CreateRequest{}).ID
	info, err := f.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"sh", "-c", "echo bye; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := follow(t, f, id, info.PID, 0)
	last := evs[len(evs)-1]
	end, ok := last.Data.(session.ProcessInfo)
	if last.Type != "exit" || !ok || end.ExitCode == nil || *end.ExitCode != 3 || end.Status != job.StatusFailed {
		t.Fatalf("last event = %s %+v; want exit with exit code 3, failed", last.Type, last.Data)
	}
}

// TestProcessPolicyDenied: the sandbox's policy holds at a process's
// start as at an exec: a program it does not allow is the policy's
// error, naming the run recorded policy_denied.
func TestProcessPolicyDenied(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}}
	id := f.create(t, session.CreateRequest{Policy: pol}).ID
	_, err := f.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"sleep", "100"}})
	wantCode(t, "a denied program", err, job.CodeCommandDenied)
	runID, _ := job.AsError(err).Details["run_id"].(string)
	res, rerr := f.r.Store().ReadResult(runID)
	if rerr != nil || res.Status != job.StatusPolicyDenied {
		t.Errorf("run %q = %s, %v; want policy_denied", runID, res.Status, rerr)
	}
	if list, _ := f.s.Processes(id); len(list) != 0 {
		t.Errorf("Processes = %+v; want none", list)
	}
}

// TestProcessesDieWithSandbox: deleting a sandbox ends its processes,
// each recorded, and its processes are then gone with it.
func TestProcessesDieWithSandbox(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			id := f.create(t, session.CreateRequest{}).ID
			info, err := f.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"sleep", "100"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.Delete(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			res, err := f.r.Store().ReadResult(info.RunID)
			if err != nil || !res.Status.Terminal() || res.Status == job.StatusCompleted {
				t.Errorf("run %s after delete = %s, %v; want ended, not completed", info.RunID, res.Status, err)
			}
			_, err = f.s.Processes(id)
			wantCode(t, "processes of a deleted sandbox", err, job.CodeSessionNotRunning)
		})
	}
}

// TestProcessInPausedSandbox: while its sandbox is paused a process is
// listed and read, but a kill, stdin or signal is session.not_running
// (paused); after resume the kill ends it.
func TestProcessInPausedSandbox(t *testing.T) {
	f := newFixture(t, "linux_sandbox", nil)
	id := f.create(t, session.CreateRequest{}).ID
	ctx := context.Background()
	info, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if list, err := f.s.Processes(id); err != nil || len(list) != 1 {
		t.Errorf("Processes while paused = %+v, %v; want the process", list, err)
	}
	_, err = f.s.KillProcess(ctx, id, info.PID)
	wantCode(t, "kill while paused", err, job.CodeSessionNotRunning)
	wantCode(t, "stdin while paused", f.s.WriteStdin(ctx, id, info.PID, []byte("x"), false), job.CodeSessionNotRunning)
	wantCode(t, "signal while paused", f.s.SignalProcess(id, info.PID, syscall.SIGTERM), job.CodeSessionNotRunning)
	if _, err := f.s.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, err := f.s.KillProcess(ctx, id, info.PID); err != nil || got.Status != job.StatusCanceled {
		t.Errorf("KillProcess after resume = %+v, %v; want canceled", got, err)
	}
}

// TestProcessLimit: session.MaxProcesses run at once in a sandbox; one
// more is session.limit_reached, and once one ended another starts.
func TestProcessLimit(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	id := f.create(t, session.CreateRequest{}).ID
	ctx := context.Background()
	var first session.ProcessInfo
	for i := range session.MaxProcesses {
		info, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sleep", "3600"}})
		if err != nil {
			t.Fatalf("process %d: %v", i+1, err)
		}
		if i == 0 {
			first = info
		}
	}
	_, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sleep", "3600"}})
	wantCode(t, "one process more than the cap", err, job.CodeSessionLimit)
	if _, err := f.s.KillProcess(ctx, id, first.PID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"true"}}); err != nil {
		t.Errorf("a start after one ended = %v; want it started", err)
	}
}

// TestProcessWithoutStdin: a process started with NoStdin reads end of
// input at once (cat ends 0 without anyone closing its input), and a
// write to its input is refused.
func TestProcessWithoutStdin(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	id := f.create(t, session.CreateRequest{}).ID
	info, err := f.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"cat"}, NoStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := follow(t, f, id, info.PID, 0)
	end, ok := evs[len(evs)-1].Data.(session.ProcessInfo)
	if !ok || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Fatalf("cat without input ended %+v; want exit 0", evs[len(evs)-1].Data)
	}
	info, err = f.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"sleep", "30"}, NoStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	err = f.s.WriteStdin(context.Background(), id, info.PID, []byte("x"), true)
	wantCode(t, "WriteStdin to a process without input", err, job.CodeInvalidRequest)
}
