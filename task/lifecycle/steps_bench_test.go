package lifecycle_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// BenchmarkTaskSteps is BenchmarkTaskLifecycle's no-quota task with the
// steps going through one shared run service (serve's case) rather than
// a step store opened per task: the time in the agent step and in the
// collection step, each a recorded run.
//
//	go test -run XXX -bench TaskSteps ./task/lifecycle
func BenchmarkTaskSteps(b *testing.B) {
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(b.TempDir(), "store")})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var agent, collect time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, tk, doc := submit(b, `echo changed > a.txt`, "")
		b.Cleanup(func() { stage.RemoveWorkspace(stage.Layout{Dir: dir}) })
		cfg := lifecycle.Config{Backend: tasktest.Backend(b), CloneBackoff: &quick, Runner: r}
		b.StartTimer()
		md, err := lifecycle.Run(context.Background(), dir, tk, doc, cfg)
		if err != nil || md.State != state.Completed {
			b.Fatalf("task = %+v %v", md, err)
		}
		b.StopTimer()
		at := transitions(b, dir)
		agent += at[state.Completing].Sub(at[state.Running])
		collect += at[state.Completed].Sub(at[state.Completing])
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(agent.Milliseconds())/n, "agent-ms/op")
	b.ReportMetric(float64(collect.Milliseconds())/n, "collect-ms/op")
}
