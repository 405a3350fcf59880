package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/plane"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
)

func newRunner(t *testing.T) (*runner.Runner, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := localprocess.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: b.Kind(), Backends: backend.Set{b.Kind(): b}, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	return r, ws
}

// openPlane is a runner, queue, worker pool and service in this process.
func openPlane(t *testing.T) (*jobs.Service, string) {
	t.Helper()
	r, ws := newRunner(t)
	p, err := plane.Open(context.Background(), plane.Config{Runner: r, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p.Jobs, ws
}

func request(id, ws string, argv ...string) job.Request {
	return job.Request{
		JobID:     id,
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: argv},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: argv[0]}}},
	}
}

func TestSubmitWaitIdempotentConflict(t *testing.T) {
	svc, ws := openPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := request("job_service-1", ws, "echo", "through the service")
	again, other := req, req
	other.Command.Argv = []string{"echo", "different"}
	acc, created, err := svc.Submit(ctx, &req)
	if err != nil || !created || acc != (jobs.Accepted{JobID: "job_service-1", Status: job.StatusQueued}) {
		t.Fatalf("Submit = %+v, %v, %v; want created and queued", acc, created, err)
	}
	res, err := svc.Wait(ctx, acc.JobID)
	if err != nil || res.Status != job.StatusCompleted || res.Stdout.Text != "through the service\n" {
		t.Fatalf("Wait = %s %q, %v; want completed \"through the service\\n\"", res.Status, res.Stdout.Text, err)
	}
	if got, created, err := svc.Submit(ctx, &again); err != nil || created || got.Status != job.StatusCompleted {
		t.Errorf("resubmit of the same request = %+v, created %v, %v; want the finished job", got, created, err)
	}
	if _, _, err := svc.Submit(ctx, &other); job.CodeOf(err) != job.CodeJobConflict {
		t.Errorf("resubmit of a different request = %v, want %s", err, job.CodeJobConflict)
	}
	v, err := svc.Get(ctx, acc.JobID, 0)
	if err != nil || v.Result == nil || v.Status.Status != job.StatusCompleted {
		t.Errorf("Get = %+v, %v; want the completed result", v, err)
	}
	list, err := svc.Artifacts(acc.JobID)
	if err != nil || list == nil {
		t.Errorf("Artifacts = %#v, %v; want an empty, non-nil list", list, err)
	}
	for name, call := range map[string]func() error{
		"Wait":      func() error { _, err := svc.Wait(ctx, "job_missing"); return err },
		"Get":       func() error { _, err := svc.Get(ctx, "job_missing", 0); return err },
		"Cancel":    func() error { _, err := svc.Cancel(ctx, "job_missing"); return err },
		"Artifacts": func() error { _, err := svc.Artifacts("job_missing"); return err },
		"Follow":    func() error { return svc.Follow(ctx, "job_missing", 0, func(jobs.Event) error { return nil }) },
	} {
		if err := call(); job.CodeOf(err) != job.CodeJobNotFound {
			t.Errorf("%s(unknown id) = %v, want %s", name, err, job.CodeJobNotFound)
		}
	}
}

func TestListValidatesAndPages(t *testing.T) {
	r, ws := newRunner(t)
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: r.Store().Dir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	svc := jobs.New(jobs.Config{Runner: r, Queue: q})
	ctx := context.Background()
	page, err := svc.List(ctx, jobs.Filter{})
	if err != nil || page.Jobs == nil || len(page.Jobs) != 0 {
		t.Fatalf("List of an empty store = %#v, %v; want an empty, non-nil list", page.Jobs, err)
	}
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		req := request(id, ws, "true")
		if _, _, err := svc.Submit(ctx, &req); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		f    jobs.Filter
	}{
		{"limit over the maximum", jobs.Filter{Limit: jobs.MaxListLimit + 1}},
		{"negative limit", jobs.Filter{Limit: -1}},
		{"unknown status", jobs.Filter{Statuses: []job.Status{"sleeping"}}},
	} {
		if _, err := svc.List(ctx, tt.f); job.CodeOf(err) != job.CodeInvalidRequest {
			t.Errorf("List(%s) = %v, want %s", tt.name, err, job.CodeInvalidRequest)
		}
	}
	var got []string
	f := jobs.Filter{Limit: 2, Statuses: []job.Status{job.StatusQueued}}
	for {
		page, err := svc.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Jobs {
			got = append(got, s.JobID)
		}
		if page.NextCursor == "" {
			break
		}
		f.After = page.NextCursor
	}
	if want := []string{"job_a", "job_b", "job_c"}; len(got) != 3 || got[0] != want[0] || got[2] != want[2] {
		t.Errorf("pages = %v, want %v", got, want)
	}
	// Canceling a queued job (no workers here) finishes it at once.
	v, err := svc.Cancel(ctx, "job_b")
	if err != nil || v.Result == nil || v.Result.Status != job.StatusCanceled {
		t.Errorf("Cancel(queued) = %+v, %v; want a canceled result", v, err)
	}
	// Its message is gone: a worker on another host, whose store cannot
	// see the canceled result, never takes it.
	if queued, err := q.Queued(ctx, "job_b"); err != nil || queued {
		t.Errorf("job_b still in the queue after its cancel = %v, %v", queued, err)
	}
	if queued, _ := q.Queued(ctx, "job_a"); !queued {
		t.Errorf("job_a left the queue; only the canceled job should")
	}
	if _, err := svc.Get(ctx, "job_a", jobs.MaxLongPoll+time.Second); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("Get with a wait over the maximum = %v, want %s", err, job.CodeInvalidRequest)
	}
}

// TestIDsWithDots: job ids may hold dots; each is one queue subject (the
// stream used to match ar.jobs.* only, so such a submit found no stream).
func TestIDsWithDots(t *testing.T) {
	svc, ws := openPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := request("job.with.dots", ws, "echo", "dots")
	if _, _, err := svc.Submit(ctx, &req); err != nil {
		t.Fatalf("Submit(job.with.dots) = %v", err)
	}
	res, err := svc.Wait(ctx, "job.with.dots")
	if err != nil || res.Status != job.StatusCompleted {
		t.Errorf("job.with.dots = %s, %v; want completed", res.Status, err)
	}
}
