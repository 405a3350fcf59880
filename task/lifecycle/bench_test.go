package lifecycle_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// BenchmarkTaskLifecycle runs whole tasks (clone of a small local repo,
// token, sandbox, a trivial agent that edits one file, patch collection)
// and reports the time spent before the agent starts (staging through
// ready), in the agent, and collecting (completing to completed).
//
//	go test -run XXX -bench TaskLifecycle ./task/lifecycle
func BenchmarkTaskLifecycle(b *testing.B) {
	b.Run("no-quota", func(b *testing.B) { benchTasks(b, "") })
	if os.Geteuid() == 0 {
		b.Run("disk-1G", func(b *testing.B) { benchTasks(b, "vm: {memory: 512M, cpus: 1, disk: 1G}\n") })
	}
}

func benchTasks(b *testing.B, extra string) {
	var setup, agent, collect time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, tk, doc := submit(b, `echo changed > a.txt`, extra)
		b.Cleanup(func() { stage.RemoveWorkspace(stage.Layout{Dir: dir}) })
		cfg := lifecycle.Config{Backend: tasktest.Backend(b), CloneBackoff: &quick}
		b.StartTimer()
		md, err := lifecycle.Run(context.Background(), dir, tk, doc, cfg)
		if err != nil || md.State != state.Completed {
			b.Fatalf("task = %+v %v", md, err)
		}
		b.StopTimer()
		at := transitions(b, dir)
		setup += at[state.Running].Sub(at[state.Staging])
		agent += at[state.Completing].Sub(at[state.Running])
		collect += at[state.Completed].Sub(at[state.Completing])
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(setup.Milliseconds())/n, "setup-ms/op")
	b.ReportMetric(float64(agent.Milliseconds())/n, "agent-ms/op")
	b.ReportMetric(float64(collect.Milliseconds())/n, "collect-ms/op")
}

// transitions reads when the task entered each state.
func transitions(b *testing.B, dir string) map[state.State]time.Time {
	f, err := os.Open(filepath.Join(dir, state.EventsFile))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	at := map[state.State]time.Time{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev state.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "state_change" {
			at[ev.To] = ev.Time
		}
	}
	return at
}
