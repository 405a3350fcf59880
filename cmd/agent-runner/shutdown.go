package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// shutdown is serve's and worker's two-stage signal handling. The first
// SIGINT or SIGTERM ends Ctx: stop taking work and let running jobs
// finish within the grace. The second closes Force: stop now, killing
// running jobs and leaving them to run again after a restart. After it,
// the signals get their default action again, so a third kills the
// process outright.
type shutdown struct {
	Ctx   context.Context
	Force <-chan struct{}
}

// shutdownSignals starts listening; stop releases the signals.
func shutdownSignals() (*shutdown, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	force := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-quit:
			return
		}
		select {
		case <-sigs:
			signal.Stop(sigs)
			close(force)
		case <-quit:
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(quit)
			cancel()
		})
	}
	return &shutdown{Ctx: ctx, Force: force}, stop
}

// Forced reports whether the second signal came.
func (s *shutdown) Forced() bool {
	select {
	case <-s.Force:
		return true
	default:
		return false
	}
}

// forcedError is what serve and worker return after a second signal, so
// that the exit status is not 0.
func forcedError() error {
	return job.Errorf(job.CodeRunInterrupted, "stopped by a second signal; running jobs were killed and run again after restart")
}

// drainingLog is the pool's Draining hook: it says what the first signal
// waits for and how not to.
func drainingLog(log *slog.Logger) func(time.Duration, []string) {
	return func(grace time.Duration, ids []string) {
		noun := "jobs"
		if len(ids) == 1 {
			noun = "job"
		}
		log.Warn(fmt.Sprintf("waiting up to %s for %d running %s: %s; send the signal again to stop now",
			grace, len(ids), noun, strings.Join(ids, ", ")), "grace", grace.String(), "jobs", ids)
	}
}
