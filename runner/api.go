// Package runner is the one job pipeline every door calls:
//
//	RunJobRequest -> validate -> policy decision -> snapshot -> backend run
//	              -> bounded capture -> artifacts -> result + hashes -> run record
//
// The library entry point is Runner.Run; the HTTP service splits it into
// Prepare (before queueing, so bad requests get 422) and Execute. A task's
// steps (the agent, the patch collection, a task shell) are runs too:
// Runner.Step, over the task's live directory instead of a snapshot, and
// as processes of one sandbox the task holds (Runner.OpenSandbox).
package runner

import (
	"time"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// Options carries per-call hooks and library-only settings that are not part
// of the public JSON contract.
type Options struct {
	// Status is called on every status change (running, then terminal).
	Status func(jobID string, s job.Status)
	// Output receives live output chunks ("stdout" or "stderr") as the
	// process writes them. It must not retain p.
	Output func(jobID, stream string, p []byte)
	// Stage is called after each pipeline stage with its duration
	// ("validate", "policy", "snapshot", "backend", "artifacts", "record").
	Stage func(jobID, stage string, d time.Duration)
	// Egress receives each egress gateway decision of an "allowlist" job
	// as its connection ends (live events); it must be goroutine-safe.
	Egress func(jobID string, d egress.Decision)
	// ReadOnly and Writable are extra host directories exposed to the job
	// at their own paths (the agent gateway's read and write roots). They
	// are library-only: no JSON door can set them.
	ReadOnly []string
	Writable []string
	// MountRoot, when set, is where workspace.readonly_mounts are found
	// instead of workspace.path (a replay runs on a restored snapshot,
	// which never held them).
	MountRoot string
	// CacheNamespace is the namespace of the job's workspace.caches: its
	// caller's, set by the door that accepted it (package buildcache),
	// never by the request. Empty: buildcache.LocalNamespace (this host's
	// own processes: run, replay, library use). SharedCaches are the
	// cache names the operator shares across callers
	// (buildcache.SharedNamespace). Library-only, like ReadOnly.
	CacheNamespace string
	SharedCaches   []string
	// Attempt is recorded in the result (1 for a first run).
	Attempt int
	// Step, when set, makes the run a task step (Runner.Step): library-only.
	Step *Step
	// Interrupted, when set and true as a run ends without completing,
	// says the run was stopped to run again (a worker's shutdown): nothing
	// terminal is recorded, status.json stays running, and the next
	// attempt records the job.
	Interrupted func() bool
}
