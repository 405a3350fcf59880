package runner_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	_ "github.com/agent-runner/agent-runner/backend/firecracker"
	_ "github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/docs/schemas"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	t     *testing.T
	r     *runner.Runner
	ws    string
	store string
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for p, c := range files {
		full := filepath.Join(ws, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(ws, 0o755)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, r: r, ws: ws, store: filepath.Join(dir, "store")}
}

func (f *fixture) request(argv []string, allowed ...string) job.Request {
	var rules []job.CommandRule
	for _, a := range allowed {
		rules = append(rules, job.CommandRule{Basename: a})
	}
	return job.Request{
		Workspace: job.Workspace{Path: f.ws},
		Command:   job.Command{Argv: argv},
		Policy:    job.Policy{AllowedCommands: rules},
		Limits:    job.Limits{TimeoutMS: 10_000},
	}
}

func (f *fixture) run(req job.Request) job.Result {
	f.t.Helper()
	res, err := f.r.Run(context.Background(), req, runner.Options{Attempt: 1})
	if err != nil {
		f.t.Fatalf("Run: %v", err)
	}
	b, _ := json.Marshal(res)
	if err := schemas.ValidateResult(b); err != nil {
		f.t.Errorf("result does not match the result schema: %v\n%s", err, b)
	}
	return res
}

func code(res job.Result) job.Code {
	if res.Error == nil {
		return ""
	}
	return res.Error.Code
}

func TestStatuses(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a"})
	tests := []struct {
		name   string
		req    job.Request
		status job.Status
		code   job.Code
	}{
		{"completed", f.request([]string{"true"}, "true"), job.StatusCompleted, ""},
		{"failed", f.request([]string{"false"}, "false"), job.StatusFailed, job.CodeRunExitNonzero},
		{"policy denied", f.request([]string{"sh", "-c", "id"}, "sh"), job.StatusPolicyDenied, job.CodeShellDenied},
		{"command denied", f.request([]string{"cat", "a.txt"}, "true"), job.StatusPolicyDenied, job.CodeCommandDenied},
		{"setup failed", f.request([]string{"no-such-binary-abc"}, "no-such-binary-abc"), job.StatusSetupFailed, job.CodeRunSpawnFailed},
		{"signaled", f.request([]string{"python3", "-c", "import os,signal; os.kill(os.getpid(), signal.SIGKILL)"}, "python3"), job.StatusFailed, job.CodeRunSignaled},
	}
	fc := f.request([]string{"true"}, "true")
	fc.Backend.Kind = "firecracker"
	tests = append(tests, struct {
		name   string
		req    job.Request
		status job.Status
		code   job.Code
	}{"backend unavailable", fc, job.StatusBackendUnavailable, job.CodeBackendUnavail})
	to := f.request([]string{"sleep", "30"}, "sleep")
	to.Limits.TimeoutMS = 200
	tests = append(tests, struct {
		name   string
		req    job.Request
		status job.Status
		code   job.Code
	}{"timed out", to, job.StatusTimedOut, job.CodeRunTimedOut})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.run(tt.req)
			if res.Status != tt.status || code(res) != tt.code {
				t.Errorf("status = %s code %q, want %s %q (error %+v)", res.Status, code(res), tt.status, tt.code, res.Error)
			}
			if tt.status == job.StatusPolicyDenied && res.PolicyDecision.Action != job.ActionDeny {
				t.Errorf("policy action = %q, want deny", res.PolicyDecision.Action)
			}
		})
	}
}

func TestCanceled(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := f.r.Run(ctx, f.request([]string{"sleep", "30"}, "sleep"), runner.Options{})
	if err != nil || res.Status != job.StatusCanceled || code(res) != job.CodeRunCanceled {
		t.Errorf("canceled job = %s %q, %v; want canceled run.canceled", res.Status, code(res), err)
	}
}

func TestTimeoutKillsForkingChild(t *testing.T) {
	f := newFixture(t, nil)
	marker := "agent-runner-orphan-check-" + filepath.Base(f.ws)
	// The parent ignores TERM and leaves a background grandchild behind.
	req := f.request([]string{"python3", "-c", `
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "` + marker + `"])
time.sleep(300)
`}, "python3")
	req.Limits.TimeoutMS = 500
	res := f.run(req)
	if res.Status != job.StatusTimedOut || res.Termination == nil || res.Termination.Reason != job.ReasonTimeout {
		t.Fatalf("status = %s termination %+v, want timed_out/timeout", res.Status, res.Termination)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if !processWith(marker) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a process carrying %q outlived the timed-out job", marker)
		}
	}
}

func processWith(marker string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) && e.Name() != "self" {
			return true
		}
	}
	return false
}

func TestOutputCapture(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request([]string{"python3", "-c", "import sys; sys.stdout.write('x'*5000); sys.stderr.buffer.write(b'ok\\xff\\xfe')"}, "python3")
	req.Limits.MaxStdoutBytes = 100
	res := f.run(req)
	if !res.Stdout.Truncated || len(res.Stdout.Text) != 100 || res.Stdout.TotalBytes != 5000 {
		t.Errorf("stdout = truncated %v len %d total %d, want true 100 5000", res.Stdout.Truncated, len(res.Stdout.Text), res.Stdout.TotalBytes)
	}
	if res.Stdout.SHA256 != job.SHA256Hex(bytes.Repeat([]byte("x"), 5000)) {
		t.Error("stdout sha256 does not cover all 5000 bytes")
	}
	raw, _ := base64.StdEncoding.DecodeString(res.Stderr.Base64)
	if string(raw) != "ok\xff\xfe" {
		t.Errorf("stderr base64 = %q, want exact bytes", raw)
	}
	stored, _ := os.ReadFile(filepath.Join(f.r.Store().RunDir(res.JobID), "stderr.txt"))
	if string(stored) != "ok\xff\xfe" {
		t.Errorf("stderr.txt = %q, want exact bytes", stored)
	}
}

func TestStoreLayout(t *testing.T) {
	f := newFixture(t, map[string]string{"src/a.py": "print(1)", ".env": "SECRET=1"})
	req := f.request([]string{"cp", "src/a.py", "out.txt"}, "cp")
	req.Policy.ArtifactGlobs = []string{"out.txt"}
	res := f.run(req)
	dir := f.r.Store().RunDir(res.JobID)
	var got []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		got = append(got, e.Name())
	}
	sort.Strings(got)
	want := []string{"artifacts", "request.json", "result.json", "snapshot", "snapshot.json", "status.json", "stderr.txt", "stdout.txt"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("run dir = %v, want %v", got, want)
	}
	if !strings.HasPrefix(res.JobID, "job_") || filepath.Dir(dir) != filepath.Join(f.store, "runs") {
		t.Errorf("job id %q in %q", res.JobID, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshot", ".env")); err == nil {
		t.Error(".env was copied into the snapshot")
	}
	var st struct{ Status job.Status }
	b, _ := os.ReadFile(filepath.Join(dir, "status.json"))
	json.Unmarshal(b, &st)
	var stored job.Result
	b, _ = os.ReadFile(filepath.Join(dir, "result.json"))
	json.Unmarshal(b, &stored)
	if st.Status != job.StatusCompleted || stored.Replay.ResultSHA256 != res.Replay.ResultSHA256 {
		t.Errorf("status.json %s, result.json hash %s; want completed and %s", st.Status, stored.Replay.ResultSHA256, res.Replay.ResultSHA256)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "out.txt" {
		t.Errorf("artifacts = %+v", res.Artifacts)
	}
}

func TestHashDeterminism(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "alpha\n"})
	req := f.request([]string{"cat", "a.txt"}, "cat")
	req.Policy.ArtifactGlobs = []string{"*.txt"}
	one, two := f.run(req), f.run(req)
	if one.JobID == two.JobID {
		t.Fatal("two runs share a job id")
	}
	if one.Replay != two.Replay {
		t.Errorf("replay hashes differ:\n%+v\n%+v", one.Replay, two.Replay)
	}
}

func TestIdempotentJobID(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request([]string{"true"}, "true")
	req.JobID = "job_fixed-1"
	first := f.run(req)
	again := f.run(req)
	if again.StartedAt != first.StartedAt {
		t.Error("re-running a finished job id ran it again")
	}
	other := f.request([]string{"false"}, "false")
	other.JobID = "job_fixed-1"
	if _, err := f.r.Run(context.Background(), other, runner.Options{}); job.CodeOf(err) != job.CodeJobConflict {
		t.Errorf("same id, different request = %v, want %s", err, job.CodeJobConflict)
	}
}

func TestTraceEchoedUnchanged(t *testing.T) {
	f := newFixture(t, nil)
	raw := `{"trace_id":"tr_1","zeta":[3,2,1],"gateway_policy_action":"allow","alpha":{"nested":true},"n":1.50}`
	req, err := job.DecodeRequest([]byte(`{"trace":` + raw + `,"workspace":{"path":"` + f.ws + `"},"command":{"argv":["true"]},"policy":{"allowed_commands":["true"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	res := f.run(*req)
	got, _ := json.Marshal(res.Trace)
	if string(got) != raw {
		t.Errorf("trace = %s, want %s", got, raw)
	}
}

func TestInvalidRequestIsAnError(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request([]string{"true"}, "true")
	req.Command.Cwd = "../../etc"
	if _, err := f.r.Run(context.Background(), req, runner.Options{}); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("Run with an escaping cwd = %v, want %s", err, job.CodePathEscape)
	}
	runs, _ := os.ReadDir(filepath.Join(f.store, "runs"))
	if len(runs) != 0 {
		t.Errorf("an invalid request left %d run records", len(runs))
	}
}

func TestRunRecordLimit(t *testing.T) {
	f := newFixture(t, map[string]string{"big.bin": strings.Repeat("z", 200_000)})
	req := f.request([]string{"python3", "-c", "print('y'*300000)"}, "python3")
	req.Limits.MaxRunRecordBytes = 120_000
	req.Policy.ArtifactGlobs = []string{"big.bin"}
	res := f.run(req)
	if res.Status != job.StatusCompleted || code(res) != "" {
		t.Errorf("status = %s %q, want completed (an artifact that does not fit the record is skipped)", res.Status, code(res))
	}
	if len(res.ArtifactsSkipped) != 1 || res.ArtifactsSkipped[0].Path != "big.bin" || res.ArtifactsSkipped[0].Reason != job.SkipMaxRunRecordBytes {
		t.Errorf("artifacts_skipped = %+v, want big.bin for %s", res.ArtifactsSkipped, job.SkipMaxRunRecordBytes)
	}
	var total int64
	filepath.Walk(f.r.Store().RunDir(res.JobID), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && !strings.Contains(p, "/snapshot") {
			total += fi.Size()
		}
		return nil
	})
	if total > req.Limits.MaxRunRecordBytes {
		t.Errorf("run record is %d bytes, over max_run_record_bytes %d", total, req.Limits.MaxRunRecordBytes)
	}
	if !res.Stdout.Truncated {
		t.Error("stdout should be cut to fit the record")
	}
}

func TestReplay(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "alpha\n"})
	req := f.request([]string{"cat", "a.txt"}, "cat")
	res := f.run(req)
	dir := f.r.Store().RunDir(res.JobID)
	rep, err := f.r.Replay(context.Background(), dir)
	if err != nil || !rep.Reproduced || rep.WorkspaceSource != "snapshot" {
		t.Fatalf("replay = %+v, %v; want reproduced from the snapshot", rep, err)
	}
	// The job changed its snapshot and the workspace changed: nothing
	// matches the recorded hash any more.
	os.WriteFile(filepath.Join(dir, "snapshot", "a.txt"), []byte("tampered"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("changed"), 0o644)
	rep, err = f.r.Replay(context.Background(), dir)
	if err != nil || rep.Reproduced || rep.Error == nil {
		t.Errorf("replay of a lost workspace = %+v, %v; want not reproduced with an error", rep, err)
	}
}

func TestReplayDetectsDifferentOutput(t *testing.T) {
	f := newFixture(t, nil)
	res := f.run(f.request([]string{"python3", "-c", "import os; print(os.getpid())"}, "python3"))
	rep, err := f.r.Replay(context.Background(), f.r.Store().RunDir(res.JobID))
	if err != nil || rep.Reproduced || rep.Checks["stdout_sha256"].Match {
		t.Errorf("replay of a nondeterministic command reproduced = %v (%v)", rep.Reproduced, err)
	}
}

func TestLiveHooks(t *testing.T) {
	f := newFixture(t, nil)
	var statuses []job.Status
	var out bytes.Buffer
	var stages []string
	res, err := f.r.Run(context.Background(), f.request([]string{"echo", "live"}, "echo"), runner.Options{
		Status: func(_ string, s job.Status) { statuses = append(statuses, s) },
		Output: func(_, stream string, p []byte) { out.WriteString(stream + ":" + string(p)) },
		Stage:  func(_, s string, _ time.Duration) { stages = append(stages, s) },
	})
	if err != nil || res.Status != job.StatusCompleted {
		t.Fatal(res.Status, err)
	}
	if strings.Join(statusStrings(statuses), ",") != "running,completed" || out.String() != "stdout:live\n" {
		t.Errorf("statuses %v output %q", statuses, out.String())
	}
	if strings.Join(stages, ",") != "validate,policy,snapshot,backend,artifacts,record" {
		t.Errorf("stages = %v", stages)
	}
}

func statusStrings(ss []job.Status) []string {
	var out []string
	for _, s := range ss {
		out = append(out, string(s))
	}
	return out
}

func TestRequireEnforcement(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", RequireEnforcement: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), job.Request{
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"true"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}},
	}, runner.Options{})
	if err != nil || res.Status != job.StatusBackendUnavailable || res.Error.Details["not_enforced"] == nil {
		t.Errorf("local_process under RequireEnforcement = %s %+v %v, want backend_unavailable naming what is not enforced", res.Status, res.Error, err)
	}
}
