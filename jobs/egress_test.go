package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/runner"
)

// TestEgressReadsTheRunRecord: Egress answers the decisions of a job's
// egress.jsonl in order (none when the job made no connection; a last
// line still being written left out), job.not_found for an unknown job,
// and run.io_failed for a log that is not JSON lines.
func TestEgressReadsTheRunRecord(t *testing.T) {
	svc, ws := openPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := request("job_egress-read", ws, "echo", "no network")
	if _, _, err := svc.Submit(ctx, &req); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Wait(ctx, req.JobID); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Egress(req.JobID)
	if err != nil || got.JobID != req.JobID || got.Decisions == nil || len(got.Decisions) != 0 {
		t.Fatalf("Egress of a job without connections = %+v, %v; want an empty list", got, err)
	}

	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	allowed := egress.Decision{Time: at, Run: req.JobID, Host: "pypi.org", Port: 443, Mode: egress.ModeTunnel, Allowed: true, Rule: "pypi.org:443", BytesUp: 10, BytesDown: 20}
	refused := egress.Decision{Time: at.Add(time.Second), Run: req.JobID, Host: "evil.example", Port: 80, Mode: egress.ModeHTTP, Rule: egress.ReasonNotAllowed}
	path := filepath.Join(svc.Store().RunDir(req.JobID), runner.EgressFile)
	log := egress.NewAuditLog(path)
	for _, d := range []egress.Decision{allowed, refused} {
		if err := log.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-11-23T09:00:02Z","host":"half`)
	f.Close()
	got, err = svc.Egress(req.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs.EgressLog{JobID: req.JobID, Decisions: []egress.Decision{allowed, refused}}, got); diff != "" {
		t.Errorf("Egress (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(path, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Egress(req.JobID); job.CodeOf(err) != job.CodeRunIOFailed {
		t.Errorf("Egress of a log that is not JSON lines = %v, want %s", err, job.CodeRunIOFailed)
	}
	if _, err := svc.Egress("job_unknown"); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("Egress of an unknown job = %v, want %s", err, job.CodeJobNotFound)
	}
}
