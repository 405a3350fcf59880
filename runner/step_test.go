package runner_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
)

// countingBackend is local_process that counts the processes it started.
type countingBackend struct {
	localprocess.Backend
	mu   sync.Mutex
	runs int
}

func (b *countingBackend) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	b.mu.Lock()
	b.runs++
	b.mu.Unlock()
	return b.Backend.Run(ctx, spec)
}

// redactor replaces word in what it forwards (a one-write scrubber, as a
// task's is) and counts Flush calls.
type redactor struct {
	w       io.Writer
	word    string
	flushes *int
}

func (r redactor) Write(p []byte) (int, error) {
	r.w.Write(bytes.ReplaceAll(p, []byte(r.word), []byte("[REDACTED]")))
	return len(p), nil
}

func (r redactor) Flush() { *r.flushes++ }

func stepRequest(ws, id string, argv []string, allowed ...string) job.Request {
	var rules []job.CommandRule
	for _, a := range allowed {
		rules = append(rules, job.CommandRule{Basename: a})
	}
	return job.Request{
		JobID:     id,
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: argv, Env: map[string]string{"TASK_ID": "t1"}},
		Policy:    job.Policy{AllowedCommands: rules, AllowShell: true, AllowedEnv: []string{"TASK_ID"}},
		Limits:    job.Limits{TimeoutMS: 10_000},
	}
}

// TestStepRunsInPlaceAndRecords: a step writes the live directory itself
// (no snapshot), its record holds the request without Step.Env, the
// allow decision and the hashes of the output Wrap let through, and the
// secret Step.Env carried never reaches the record.
func TestStepRunsInPlaceAndRecords(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "before"})
	const secret = "s3cr3t-value-42"
	b := &countingBackend{}
	flushes := 0
	req := stepRequest(f.ws, runner.StepID("t1", "agent"),
		[]string{"sh", "-c", `echo after >a.txt; echo "$TASK_ID $API_KEY"; echo "err $API_KEY" >&2`}, "sh")
	res, err := f.r.Step(context.Background(), req, runner.Options{Step: &runner.Step{
		Backend: b,
		Env:     []string{"API_KEY=" + secret},
		Wrap: func(_ string, capture io.Writer) io.Writer {
			return redactor{w: capture, word: secret, flushes: &flushes}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusCompleted || res.JobID != "t1.agent" {
		t.Fatalf("step = %s %s (%+v), want completed t1.agent", res.JobID, res.Status, res.Error)
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "a.txt")); string(got) != "after\n" {
		t.Errorf("live a.txt = %q, want the step's write %q", got, "after\n")
	}
	if _, err := os.Stat(filepath.Join(f.store, "runs", res.JobID, store.SnapshotDir)); err == nil {
		t.Errorf("a step took a snapshot")
	}
	if res.Stdout.Text != "t1 [REDACTED]\n" || res.Stderr.Text != "err [REDACTED]\n" {
		t.Errorf("captured = %q / %q, want the wrapped (scrubbed) output", res.Stdout.Text, res.Stderr.Text)
	}
	sum := sha256.Sum256([]byte("t1 [REDACTED]\n"))
	if res.Stdout.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("stdout sha256 = %s, want the scrubbed output's", res.Stdout.SHA256)
	}
	if flushes != 2 {
		t.Errorf("Flush calls = %d, want 2 (stdout and stderr)", flushes)
	}
	if res.PolicyDecision.Action != job.ActionAllow || res.PolicyDecision.PolicyVersion == "" {
		t.Errorf("decision = %+v, want allow with a policy version", res.PolicyDecision)
	}
	dir := filepath.Join(f.store, "runs", res.JobID)
	for _, name := range []string{store.RequestFile, store.ResultFile, store.StatusFile, store.StdoutFile, store.StderrFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("record %s: %v", name, err)
		}
		if strings.Contains(string(data), secret) {
			t.Errorf("record %s holds the secret: %s", name, data)
		}
	}
	stored, err := f.r.Store().ReadResult(res.JobID)
	if err != nil || stored.Replay.ResultSHA256 != res.Replay.ResultSHA256 {
		t.Errorf("stored result = %+v, %v; want the returned one", stored.Replay, err)
	}
}

// TestStepPolicyDenied: a step whose command the policy denies never
// reaches its backend, and its record says why.
func TestStepPolicyDenied(t *testing.T) {
	f := newFixture(t, nil)
	b := &countingBackend{}
	req := stepRequest(f.ws, "t1.agent", []string{"cat", "/etc/hostname"}, "true")
	req.Policy.AllowShell = false
	res, err := f.r.Step(context.Background(), req, runner.Options{Step: &runner.Step{Backend: b}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusPolicyDenied || code(res) != job.CodeCommandDenied || res.Termination != nil {
		t.Errorf("denied step = %s %q termination %+v, want policy_denied policy.command_denied and none", res.Status, code(res), res.Termination)
	}
	if b.runs != 0 {
		t.Errorf("backend ran %d processes for a denied step", b.runs)
	}
	stored, err := f.r.Store().ReadResult("t1.agent")
	if err != nil || stored.Error == nil || stored.Error.Code != job.CodeCommandDenied || stored.PolicyDecision.Action != job.ActionDeny {
		t.Errorf("recorded = %+v %+v, %v; want the denial", stored.Error, stored.PolicyDecision, err)
	}
}

// TestStepIDsAreFresh: a step never answers from another run's record:
// a second run of the same step, and a job that took the step's id
// first with an identical request, move it to the next id.
func TestStepIDsAreFresh(t *testing.T) {
	f := newFixture(t, nil)
	b := &countingBackend{}
	req := stepRequest(f.ws, "t1.collect", []string{"true"}, "true")
	// Someone else's job, claimed under the step's id with the same
	// request, and finished "completed" without running anything.
	squat := req
	squat.Backend.Kind = "local_process"
	if _, err := f.r.Run(context.Background(), squat, runner.Options{}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		res, err := f.r.Step(context.Background(), req, runner.Options{Step: &runner.Step{Backend: b}})
		if err != nil || res.Status != job.StatusCompleted {
			t.Fatalf("step = %+v, %v", res, err)
		}
		ids = append(ids, res.JobID)
	}
	if ids[0] != "t1.collect-2" || ids[1] != "t1.collect-3" {
		t.Errorf("step ids = %v, want [t1.collect-2 t1.collect-3]", ids)
	}
	if b.runs != 2 {
		t.Errorf("backend ran %d processes, want 2 (each step runs)", b.runs)
	}
}

func TestStepID(t *testing.T) {
	long := strings.Repeat("a", 128)
	tests := []struct{ task, step, want string }{
		{"t1", "agent", "t1.agent"},
		{strings.Repeat("b", 119), "agent", strings.Repeat("b", 119) + ".agent"},
	}
	for _, tt := range tests {
		if got := runner.StepID(tt.task, tt.step); got != tt.want {
			t.Errorf("StepID(%q, %q) = %q, want %q", tt.task, tt.step, got, tt.want)
		}
	}
	a, b := runner.StepID(long, "collect"), runner.StepID(long[:127]+"b", "collect")
	for _, id := range []string{a, b} {
		if !store.ValidJobID(id+"-64") || !strings.HasSuffix(id, ".collect") {
			t.Errorf("StepID(long) = %q: not a valid id with room for an attempt suffix", id)
		}
	}
	if a == b {
		t.Errorf("StepID gives two long task ids the same run id %q", a)
	}
}

// TestStepIsNotReplayable: a step ran in a live directory and kept no
// snapshot, so replaying its record is refused rather than run over
// whatever the directory holds now.
func TestStepIsNotReplayable(t *testing.T) {
	f := newFixture(t, nil)
	res, err := f.r.Step(context.Background(), stepRequest(f.ws, "t1.agent", []string{"true"}, "true"), runner.Options{Step: &runner.Step{Backend: &countingBackend{}}})
	if err != nil || res.Status != job.StatusCompleted {
		t.Fatalf("step = %+v, %v", res, err)
	}
	rep, err := f.r.Replay(context.Background(), f.r.Store().RunDir(res.JobID))
	if err != nil || rep.Error == nil || rep.Error.Code != job.CodeSnapshotFailed || rep.ReplayJobID != "" {
		t.Errorf("Replay(step) = %+v, %v; want a %s report and no replay run", rep, err, job.CodeSnapshotFailed)
	}
}

// TestStepGetsNoDiskQuota: a runner's default disk_mb (a size-limited
// copy of the workspace) never applies to a step, which must run in the
// task's own directory; a step asking for one is refused.
func TestStepGetsNoDiskQuota(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), Defaults: job.Limits{DiskMB: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	opts := runner.Options{Step: &runner.Step{Backend: &countingBackend{}}}
	res, err := r.Step(context.Background(), stepRequest(ws, "t1.agent", []string{"true"}, "true"), opts)
	if err != nil || res.Status != job.StatusCompleted {
		t.Fatalf("step = %+v, %v", res, err)
	}
	req, err := r.Store().ReadRequest(res.JobID)
	if err != nil || req.Limits.DiskMB != 0 || req.Limits.DiskInodes != 0 {
		t.Errorf("recorded limits = %+v, %v; want no disk quota", req.Limits, err)
	}
	asks := stepRequest(ws, "t1.collect", []string{"true"}, "true")
	asks.Limits.DiskMB = 16
	if _, err := r.Step(context.Background(), asks, opts); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("step with disk_mb = %v, want %s", err, job.CodeInvalidRequest)
	}
}
