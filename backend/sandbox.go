package backend

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// Sandboxes is implemented by a backend that keeps sandboxes: a sandbox
// outlives one process, so a caller can run many in it, move files in
// and out, pause it and delete it (containerd's sandbox.Controller is
// the model). A backend that implements it still implements Run, the
// one-shot path, for its callers.
//
// The lifecycle every such backend implements:
//
//	Create -> Exec, ReadFile, WriteFile (any number, concurrently)
//	       -> Pause -> Resume (any number of times)
//	       -> Delete (once is enough, more is harmless)
//
// Create applies the Spec's workspace, view (ReadOnly, Writable, Binds),
// network, egress and limits, as Run would; the limits on memory, CPU,
// processes, /tmp and disk cover every process of the sandbox together.
// Spec.Argv, Env, Cwd, Stdin, Stdout, Stderr and TTY are not used by
// Create (each Exec brings its own), nor is Usage (no live samples yet). Spec.Limits.Timeout and KillGrace are
// the default of an Exec that sets none.
type Sandboxes interface {
	Create(ctx context.Context, spec Spec) (Sandbox, error)
}

// Sandbox is one live sandbox. Its methods may be called from several
// goroutines at once. Once Delete was called every other method fails
// with job.not_found.
type Sandbox interface {
	// ID names the sandbox (the Spec's JobID).
	ID() string
	// Exec runs one process in the sandbox to completion, in a process
	// group of its own, confined as the sandbox's workload is. Its
	// timeout and ctx cancel stop that group (TERM, the kill grace,
	// KILL); processes it started in the background and left in other
	// groups keep running until Delete. The error is non-nil only when
	// the process could not be started (job codes, as Run's); how it
	// ended is in Outcome: ExitCode or Signal, Reason (exit, signal,
	// timeout, canceled, oom), its own CPU time (PeakMemoryBytes is the
	// sandbox's so far), and Enforced/NotEnforced as for Run. Layers and
	// Release are never set. An Exec in a paused sandbox starts once it
	// is resumed.
	Exec(ctx context.Context, e Exec) (Outcome, error)
	// Pause freezes every process of the sandbox; they make no progress
	// until Resume. A backend that cannot freeze here fails with
	// backend.unavailable and leaves the sandbox running.
	Pause(ctx context.Context) error
	// Resume thaws a paused sandbox; on a running one it does nothing.
	Resume(ctx context.Context) error
	// ReadFile copies the regular file rel (relative to the workspace
	// root) to w, refusing one larger than limit bytes (a negative limit:
	// no cap). It never follows a symlink the workload wrote and never
	// opens anything but a regular file (package safecopy's rules).
	ReadFile(ctx context.Context, rel string, w io.Writer, limit int64) error
	// WriteFile creates or replaces the regular file rel in the workspace
	// with r's bytes and mode, owned by the sandbox's workload user. Its
	// parent directory must exist; no symlink on the way is followed.
	WriteFile(ctx context.Context, rel string, r io.Reader, mode fs.FileMode) error
	// Delete kills every process of the sandbox and frees what it holds
	// (mounts, cgroups, ids, the workspace disk; the workspace directory
	// of the Spec stays, as after Run).
	Delete(ctx context.Context) error
}

// Exec is one process to run in a sandbox.
type Exec struct {
	// Argv[0] is the executable: an absolute path, or one relative to
	// Cwd inside the workspace.
	Argv []string
	// Env is the complete environment ("KEY=value"); nothing is
	// inherited, not even the Spec's.
	Env []string
	// Cwd is relative to the workspace root ("" or "." for the root).
	Cwd string
	// Stdin, when non-nil, is the process's standard input (else
	// /dev/null); Stdout and Stderr receive its output (nil discards
	// it). As in Spec, the writers must be safe to call from the
	// backend's copying goroutines, and Exec returns when the process
	// ends whether or not Stdin reached EOF.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Timeout, when positive, stops the process group after this long;
	// zero takes the Spec's Limits.Timeout. KillGrace is the time
	// between TERM and KILL (zero: the Spec's, else DefaultKillGrace).
	Timeout   time.Duration
	KillGrace time.Duration
}

// ExecLimits are the timeout and kill grace that apply to e in a
// sandbox created from a Spec with limits lim.
func ExecLimits(lim Limits, e Exec) Limits {
	out := Limits{Timeout: lim.Timeout, KillGrace: lim.KillGrace}
	if e.Timeout > 0 {
		out.Timeout = e.Timeout
	}
	if e.KillGrace > 0 {
		out.KillGrace = e.KillGrace
	}
	return out
}
