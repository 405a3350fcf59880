package backend

import (
	"context"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// DefaultKillGrace is the time between the polite and the forced stop.
const DefaultKillGrace = 2 * time.Second

// Supervise enforces a Spec's timeout and ctx cancellation for one running
// process. When either fires it calls stop(false) (SIGTERM to the tree),
// then stop(true) (SIGKILL) after the kill grace unless done is closed
// first. It returns once done is closed, with job.ReasonTimeout,
// job.ReasonCanceled, or "" when the process ended on its own.
func Supervise(ctx context.Context, lim Limits, done <-chan struct{}, stop func(force bool)) string {
	var timeout <-chan time.Time
	if lim.Timeout > 0 {
		t := time.NewTimer(lim.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var reason string
	select {
	case <-done:
		return ""
	case <-timeout:
		reason = job.ReasonTimeout
	case <-ctx.Done():
		reason = job.ReasonCanceled
	}
	stop(false)
	grace := lim.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		stop(true)
		<-done
	}
	return reason
}
