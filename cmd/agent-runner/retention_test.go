package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/internal/logtest"
	"github.com/agent-runner/agent-runner/job"
)

// TestRetainEveryRunsEachKind: serve's retention runs every kind's at
// start, a kind that fails is logged with its kind and does not keep the
// others from running, and what each removed is logged with its kind.
func TestRetainEveryRunsEachKind(t *testing.T) {
	var logs logtest.Capture
	var ran []string
	kind := func(name string, removed []string, err error) retention {
		return retention{name, func(time.Time) ([]string, error) {
			ran = append(ran, name)
			return removed, err
		}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one round, then return
	retainEvery(ctx, time.Hour, logs.Logger(),
		kind("job", nil, job.Errorf(job.CodeRunIOFailed, "disk gone")),
		kind("task", []string{"t1"}, nil),
		kind("agent_run", []string{"r1", "r2"}, nil))
	if diff := cmp.Diff([]string{"job", "task", "agent_run"}, ran); diff != "" {
		t.Errorf("kinds run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]logtest.Line{{Level: "WARN", Msg: "retention failed", ID: "job"}}, logs.Problems(t, "kind")); diff != "" {
		t.Errorf("problems logged (-want +got):\n%s", diff)
	}
	for _, want := range []string{`"kind":"task","removed":["t1"]`, `"kind":"agent_run","removed":["r1","r2"]`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}
