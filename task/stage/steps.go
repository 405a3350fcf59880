package stage

import (
	"path/filepath"

	"github.com/agent-runner/agent-runner/runner"
)

// StepStore is the run store of a task's step records when its caller
// gave no run service (library use and tests): <task>/steps, so the
// records go with the task. serve and worker give theirs, whose records
// are <store-dir>/runs/<task_id>.<step>.
func (l Layout) StepStore() string { return filepath.Join(l.Dir, "steps") }

// StepRunner is r, or, when r is nil, a runner over l.StepStore() and
// the function that closes it once the step has ended.
func StepRunner(r *runner.Runner, l Layout) (*runner.Runner, func() error, error) {
	if r != nil {
		return r, func() error { return nil }, nil
	}
	own, err := runner.New(runner.Config{StoreDir: l.StepStore()})
	if err != nil {
		return nil, nil, err
	}
	return own, own.Close, nil
}

// MemoryMB is n bytes in whole MiB, rounded up (a job's memory_mb).
func MemoryMB(n int64) int64 { return (n + 1<<20 - 1) >> 20 }
