package session_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// auditLine is what the tests read of a sandbox's audit line.
type auditLine struct {
	Event  string          `json:"event"`
	RunID  string          `json:"run_id"`
	Tool   string          `json:"tool"`
	Args   map[string]any  `json:"args"`
	Result map[string]any  `json:"result"`
	OK     *bool           `json:"ok"`
	Code   string          `json:"code"`
	Exit   string          `json:"exit_reason"`
	Policy json.RawMessage `json:"policy"`
}

// auditLines reads sandbox id's audit log, checks its chain with the
// package's verifier and returns its lines.
func auditLines(t *testing.T, f *fixture, id string, complete bool) (raw []byte, lines []auditLine) {
	t.Helper()
	raw, err := f.s.AuditLog(id)
	if err != nil {
		t.Fatalf("AuditLog(%s) = %v", id, err)
	}
	rep, err := audit.Verify(bytes.NewReader(raw))
	if err != nil || !rep.OK || rep.Complete != complete {
		t.Fatalf("Verify(audit of %s) = %+v, %v; want ok, complete %v", id, rep, err, complete)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		var e auditLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line %s: %v", l, err)
		}
		if e.RunID != id {
			t.Errorf("audit line run_id = %q, want %q", e.RunID, id)
		}
		lines = append(lines, e)
	}
	return raw, lines
}

// step names a line as the test compares it: event, tool, outcome.
func step(e auditLine) string {
	s := e.Event
	if e.Tool != "" {
		s += " " + e.Tool
	}
	if e.OK != nil && !*e.OK {
		s += " refused " + e.Code
	}
	if e.Exit != "" {
		s += " " + e.Exit
	}
	return s
}

// TestAuditLog: every call that acts on a sandbox is one line of its
// audit log, refused ones with their code; the chain verifies, ends with
// run_end, names the written bytes' sha256 and never an env value.
func TestAuditLog(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			ctx := session.WithOwner(context.Background(), "alice")
			rec, _, err := f.s.Create(ctx, session.CreateRequest{Env: map[string]string{"DEFAULT_SECRET": "default-value-xyz"}})
			if err != nil {
				t.Fatal(err)
			}
			id := rec.ID
			data := []byte("audited bytes\n")
			if err := f.s.WriteFile(ctx, id, "src/a.txt", data, 0o640); err != nil {
				t.Fatal(err)
			}
			err = f.s.WriteFile(ctx, id, "../escape.txt", data, 0o644)
			wantCode(t, "a write out of the workspace", err, job.CodePathEscape)
			res, err := f.s.Exec(ctx, id, session.ExecRequest{Argv: []string{"cat", "src/a.txt"}, Env: map[string]string{"API_TOKEN": "s3cret-value-abc"}})
			if err != nil || res.Stdout != string(data) {
				t.Fatalf("Exec = %+v, %v", res, err)
			}
			if _, err := f.s.MakeDir(ctx, id, "out"); err != nil {
				t.Fatal(err)
			}
			if err := f.s.MoveFile(ctx, id, "src/a.txt", "out/a.txt"); err != nil {
				t.Fatal(err)
			}
			if err := f.s.RemoveFile(ctx, id, "src", false); err != nil {
				t.Fatal(err)
			}
			p, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sleep", "60"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.s.SignalProcess(id, p.PID, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.KillProcess(ctx, id, p.PID); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
			err = f.s.WriteFile(ctx, id, "b.txt", data, 0o644)
			wantCode(t, "a write while paused", err, job.CodeSessionNotRunning)
			if _, err := f.s.Resume(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.SetTimeout(id, 60); err != nil {
				t.Fatal(err)
			}
			_, lines := auditLines(t, f, id, false)
			if _, err := f.s.Delete(session.WithOwner(context.Background(), "bob"), id); err != nil {
				t.Fatal(err)
			}
			// Reads are not recorded; an ended sandbox's calls are not
			// either (its log is closed).
			var buf bytes.Buffer
			if err := f.s.ReadFile(ctx, id, "out/a.txt", &buf); job.CodeOf(err) != job.CodeSessionNotRunning {
				t.Errorf("ReadFile after delete = %v, want session.not_running", err)
			}
			raw, all := auditLines(t, f, id, true)
			if diff := cmp.Diff(lines, all[:len(lines)]); diff != "" {
				t.Errorf("the log before the end is not a prefix of the log after it (-before +after):\n%s", diff)
			}
			got := make([]string, len(all))
			for i, e := range all {
				got[i] = step(e)
			}
			want := []string{
				"run_start",
				"sandbox_call write_file",
				"sandbox_call write_file refused validation.path_escape",
				"sandbox_call exec",
				"sandbox_call make_dir",
				"sandbox_call move_file",
				"sandbox_call remove_file",
				"sandbox_call process_start",
				"sandbox_call process_signal",
				"sandbox_call process_kill",
				"sandbox_call pause",
				"sandbox_call write_file refused session.not_running",
				"sandbox_call resume",
				"sandbox_call set_timeout",
				"run_end stopped",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("audit lines (-want +got):\n%s", diff)
			}
			if len(all) != len(want) {
				return
			}
			sum := sha256.Sum256(data)
			checks := []struct {
				line       int
				args, want map[string]any
			}{
				{0, all[0].Args, map[string]any{"by": "alice", "backend": kind, "state": "running", "start": "cold", "start_reason": session.ColdNoTemplate}},
				{1, all[1].Args, map[string]any{"path": "src/a.txt", "bytes": float64(len(data)), "sha256": hex.EncodeToString(sum[:]), "mode": "0640"}},
				{3, all[3].Args, map[string]any{"argv": []any{"cat", "src/a.txt"}, "env_keys": []any{"API_TOKEN"}}},
				{3, all[3].Result, map[string]any{"run_id": res.RunID, "status": "completed", "exit_code": float64(0)}},
				{5, all[5].Args, map[string]any{"from": "src/a.txt", "to": "out/a.txt"}},
				{6, all[6].Args, map[string]any{"path": "src", "recursive": false}},
				{7, all[7].Result, map[string]any{"pid": float64(p.PID), "run_id": p.RunID}},
				{8, all[8].Args, map[string]any{"pid": float64(p.PID), "signal": "CONT"}},
				{13, all[13].Args, map[string]any{"timeout_s": float64(60)}},
				{14, all[14].Args, map[string]any{"by": "bob", "state": "stopped"}},
			}
			for _, c := range checks {
				if diff := cmp.Diff(c.want, c.args); diff != "" {
					t.Errorf("line %d (%s) (-want +got):\n%s", c.line+1, step(all[c.line]), diff)
				}
			}
			for _, secret := range []string{"s3cret-value-abc", "default-value-xyz"} {
				if bytes.Contains(raw, []byte(secret)) {
					t.Errorf("the audit log holds the env value %q", secret)
				}
			}
		})
	}
}

// TestAuditFailsClosed: a call whose line cannot be written answers
// run.io_failed, and every later call is refused before it acts; the
// sandbox still ends.
func TestAuditFailsClosed(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	id := f.create(t, session.CreateRequest{}).ID
	session.BreakAudit(f.s, id)
	err := f.s.WriteFile(context.Background(), id, "a.txt", []byte("a"), 0o644)
	wantCode(t, "a write whose line cannot be written", err, job.CodeRunIOFailed)
	_, err = f.s.Exec(context.Background(), id, session.ExecRequest{Argv: []string{"touch", "b.txt"}})
	wantCode(t, "an exec after that", err, job.CodeRunIOFailed)
	if _, err := f.s.StatFile(context.Background(), id, "b.txt"); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("StatFile(b.txt) = %v, want job.not_found: the refused exec ran", err)
	}
	if rec, err := f.s.Delete(context.Background(), id); err != nil || rec.State != session.StateStopped {
		t.Errorf("Delete = %s, %v; want stopped", rec.State, err)
	}
}

// TestAuditEnds: a sandbox that expires, and one that cannot be built,
// end their logs with run_end and the reason.
func TestAuditEnds(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Now = c.now })
	id := f.create(t, session.CreateRequest{TimeoutS: 5}).ID
	f.s.Reap(c.t.Add(5 * time.Second))
	_, lines := auditLines(t, f, id, true)
	if got, want := lines[len(lines)-1].Args, (map[string]any{"state": "expired", "reason": session.EndTimeout}); !cmp.Equal(got, want) {
		t.Errorf("expired run_end args = %v, want %v", got, want)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "not-a-repository"), 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := workspaceroot.New([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	f = newFixture(t, "local_process", func(cfg *session.Config) { cfg.Roots = roots })
	_, _, err = f.s.Create(context.Background(), session.CreateRequest{ID: "bad", Workspace: &session.Workspace{Repository: filepath.Join(root, "not-a-repository")}})
	if err == nil {
		t.Fatal("Create from a directory that is not a repository succeeded")
	}
	_, lines = auditLines(t, f, "bad", true)
	got := make([]string, len(lines))
	for i, e := range lines {
		got[i] = step(e)
	}
	want := []string{"run_start refused " + string(job.CodeOf(err)), "run_end failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a failed create's audit lines (-want +got):\n%s", diff)
	}
	if _, err := f.s.AuditLog("no-such"); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("AuditLog(no-such) = %v, want job.not_found", err)
	}
}

// TestAuditPolicyDenied: an exec and a process the sandbox's policy
// denies are lines refused with the policy's code, naming their runs.
func TestAuditPolicyDenied(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	id := f.create(t, session.CreateRequest{Policy: &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}}}).ID
	res := f.exec(t, id, "ls")
	_, err := f.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"ls"}})
	if err == nil {
		t.Fatal("StartProcess(ls) succeeded, want the policy's denial")
	}
	_, lines := auditLines(t, f, id, false)
	var got []string
	for _, e := range lines {
		got = append(got, step(e))
	}
	want := []string{"run_start", "sandbox_call exec refused " + string(res.Error.Code), "sandbox_call process_start refused " + string(job.CodeOf(err))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit lines (-want +got):\n%s", diff)
	}
	if len(lines) == 3 {
		if lines[1].Result["status"] != string(job.StatusPolicyDenied) || lines[1].Result["run_id"] != res.RunID {
			t.Errorf("denied exec's result = %v, want status policy_denied, run_id %s", lines[1].Result, res.RunID)
		}
		if lines[2].Result["run_id"] == nil {
			t.Errorf("denied process's result = %v, want its run_id", lines[2].Result)
		}
		if len(lines[0].Policy) == 0 {
			t.Error("run_start carries no policy")
		}
	}
}

// TestAuditPooled: a sandbox claimed from a warm pool opens its log at
// the claim, in its own record's directory, under the caller's id.
func TestAuditPooled(t *testing.T) {
	f, _ := poolFixture(t, "local_process", 1, nil)
	rec := f.create(t, session.CreateRequest{ID: "warm-one", Template: "t"})
	if rec.Start != session.StartWarm {
		t.Fatalf("start = %q, want warm", rec.Start)
	}
	f.exec(t, rec.ID, "true")
	if _, err := f.s.Delete(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	_, lines := auditLines(t, f, rec.ID, true)
	var got []string
	for _, e := range lines {
		got = append(got, step(e))
	}
	if diff := cmp.Diff([]string{"run_start", "sandbox_call exec", "run_end stopped"}, got); diff != "" {
		t.Errorf("a claimed sandbox's audit lines (-want +got):\n%s", diff)
	}
	if lines[0].Args["start"] != session.StartWarm || lines[0].Args["template"] != "t" {
		t.Errorf("run_start args = %v, want start warm, template t", lines[0].Args)
	}
}
