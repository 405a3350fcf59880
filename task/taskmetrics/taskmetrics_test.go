package taskmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agent-runner/agent-runner/task/state"
)

func TestTransitionsFeedEveryMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return clock }
	created := clock
	rec := func(id string, s state.State) state.Record {
		r := state.Record{TaskID: id, State: s, CreatedAt: created}
		if s.Terminal() {
			end := clock
			r.EndedAt = &end
		}
		return r
	}
	walk := func(id string, path ...state.State) {
		from := state.State("")
		for _, s := range path {
			m.Observe(from, rec(id, s))
			from = s
			clock = clock.Add(2 * time.Second)
		}
	}
	walk("a", state.Pending, state.Staging, state.Provisioning, state.Ready, state.Running, state.Completing, state.Completed)
	walk("b", state.Pending, state.Staging, state.Provisioning, state.Ready, state.Running)
	// A task found interrupted after a restart enters "failed" without
	// ever having been active in this process: no gauge goes negative.
	walk("c", state.Failed)

	if got := testutil.ToFloat64(m.total.WithLabelValues("running")); got != 2 {
		t.Errorf("tasks_total{running} = %v", got)
	}
	if got := testutil.ToFloat64(m.total.WithLabelValues("completed")); got != 1 {
		t.Errorf("tasks_total{completed} = %v", got)
	}
	if got := testutil.ToFloat64(m.active.WithLabelValues("running")); got != 1 {
		t.Errorf("active{running} = %v", got)
	}
	for _, s := range []string{"pending", "staging", "provisioning", "ready", "completing"} {
		if got := testutil.ToFloat64(m.active.WithLabelValues(s)); got != 0 {
			t.Errorf("active{%s} = %v", s, got)
		}
	}
	if got := testutil.ToFloat64(m.connected); got != 1 {
		t.Errorf("agent_connected = %v", got)
	}
	out, _ := testutil.CollectAndLint(m.provision)
	if len(out) != 0 {
		t.Errorf("lint: %v", out)
	}
	// Provisioning took 2 s for both a and b.
	if n := testutil.CollectAndCount(m.provision); n != 1 {
		t.Errorf("provision collectors = %d", n)
	}
	exp := `
# HELP agentic_provision_duration_seconds Time from provisioning to ready (sandbox, token, secrets).
# TYPE agentic_provision_duration_seconds histogram
agentic_provision_duration_seconds_bucket{le="0.01"} 0
agentic_provision_duration_seconds_bucket{le="0.03"} 0
agentic_provision_duration_seconds_bucket{le="0.1"} 0
agentic_provision_duration_seconds_bucket{le="0.3"} 0
agentic_provision_duration_seconds_bucket{le="1"} 0
agentic_provision_duration_seconds_bucket{le="3"} 2
agentic_provision_duration_seconds_bucket{le="10"} 2
agentic_provision_duration_seconds_bucket{le="30"} 2
agentic_provision_duration_seconds_bucket{le="100"} 2
agentic_provision_duration_seconds_bucket{le="300"} 2
agentic_provision_duration_seconds_bucket{le="+Inf"} 2
agentic_provision_duration_seconds_sum 4
agentic_provision_duration_seconds_count 2
`
	if err := testutil.CollectAndCompare(m.provision, strings.NewReader(exp)); err != nil {
		t.Error(err)
	}
	// a: created at t0, completed after 6 transitions of 2 s = 12 s.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP agentic_task_duration_seconds Agent task duration from submission to its terminal state, by outcome (the terminal state).
# TYPE agentic_task_duration_seconds histogram
agentic_task_duration_seconds_bucket{outcome="completed",le="1"} 0
agentic_task_duration_seconds_bucket{outcome="completed",le="3"} 0
agentic_task_duration_seconds_bucket{outcome="completed",le="9"} 0
agentic_task_duration_seconds_bucket{outcome="completed",le="27"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="81"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="243"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="729"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="2187"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="6561"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="19683"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="59049"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="177147"} 1
agentic_task_duration_seconds_bucket{outcome="completed",le="+Inf"} 1
agentic_task_duration_seconds_sum{outcome="completed"} 12
agentic_task_duration_seconds_count{outcome="completed"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="1"} 0
agentic_task_duration_seconds_bucket{outcome="failed",le="3"} 0
agentic_task_duration_seconds_bucket{outcome="failed",le="9"} 0
agentic_task_duration_seconds_bucket{outcome="failed",le="27"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="81"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="243"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="729"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="2187"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="6561"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="19683"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="59049"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="177147"} 1
agentic_task_duration_seconds_bucket{outcome="failed",le="+Inf"} 1
agentic_task_duration_seconds_sum{outcome="failed"} 24
agentic_task_duration_seconds_count{outcome="failed"} 1
`), "agentic_task_duration_seconds"); err != nil {
		t.Error(err)
	}
}
