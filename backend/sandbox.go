package backend

import (
	"context"
	"io"
	"io/fs"
	"syscall"
	"time"
)

// Sandboxes is implemented by a backend that keeps sandboxes: a sandbox
// outlives one process, so a caller can run many in it, move files in
// and out, pause it and delete it (containerd's sandbox.Controller is
// the model). A backend that implements it runs its one-shot Run on it:
// Create, one Start and Wait, Delete.
//
// The lifecycle every such backend implements:
//
//	Create -> Start (a Process: Wait, Signal, Resize, CloseStdin),
//	          Exec (Start and Wait), ReadFile, WriteFile
//	          (any number, concurrently)
//	       -> Pause -> Resume (any number of times)
//	       -> Delete (once is enough, more is harmless)
//
// Create applies the Spec's workspace, view (ReadOnly, Writable, Binds),
// network, egress and limits, as Run would; the limits on memory, CPU,
// processes, /tmp and disk cover every process of the sandbox together.
// Spec.Argv, Env, Cwd, Stdin, Stdout, Stderr and TTY are not used by
// Create (each Exec brings its own), nor is Usage (no live samples yet).
// Spec.Limits.Timeout and KillGrace are the default of an Exec that
// sets none.
type Sandboxes interface {
	Create(ctx context.Context, spec Spec) (Sandbox, error)
}

// Sandbox is one live sandbox. Its methods may be called from several
// goroutines at once. Once Delete was called every other method fails
// with job.not_found.
type Sandbox interface {
	// ID names the sandbox (the Spec's JobID).
	ID() string
	// Start starts one process in the sandbox, in a process group (with
	// a Terminal or TTY: a session) of its own, confined as the
	// sandbox's workload is, and returns once it runs. Its timeout runs
	// from here; ctx bounds only the start (a Start in a paused sandbox
	// returns once the sandbox is resumed, or when ctx ends with
	// run.canceled: then the process never starts, or is killed as it
	// does). The error is non-nil only when the process
	// could not be started (job codes, as Run's: run.spawn_failed for a
	// program that cannot be executed).
	Start(ctx context.Context, e Exec) (Process, error)
	// Exec is Start and then Wait with the same ctx.
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

// Process is a process Start started. Its methods may be called from
// several goroutines at once.
type Process interface {
	// ID is the process's pid as the sandbox sees it (its process group
	// and, with a terminal, its session).
	ID() int
	// Wait waits for the process to end and its output to be drained,
	// and returns how it ended: ExitCode or Signal, Reason (exit,
	// signal, timeout, canceled, oom), its own CPU time (PeakMemoryBytes
	// is the sandbox's so far), and Enforced/NotEnforced as for Run;
	// Layers and Release are never set. When ctx ends first the
	// process's group is stopped as on a timeout (TERM, the kill grace,
	// KILL) and the Reason is canceled. Processes it started in the
	// background and left in other groups keep running until Delete.
	// Wait may be called more than once; every call returns the same.
	// The error is non-nil only when the backend lost the process (the
	// sandbox's init died under it).
	Wait(ctx context.Context) (Outcome, error)
	// Signal sends sig to the process's group. Once the process ended
	// it does nothing.
	Signal(sig syscall.Signal) error
	// Resize sets the size of the process's terminal (Exec.Terminal);
	// the process gets SIGWINCH. It fails with run.spawn_failed for a
	// process without one.
	Resize(cols, rows uint16) error
	// CloseStdin ends the process's standard input: the pipe the
	// backend copies Exec.Stdin into is closed, so the process reads EOF
	// after what the copy already passed on (bytes the reader had not
	// yet delivered are dropped). With a Terminal it types the
	// terminal's end-of-file character (^D), as a user would. It does
	// nothing to a stdin that is the caller's *os.File or nil.
	CloseStdin() error
}

// Terminal is the pseudo-terminal a process runs on.
type Terminal struct {
	// Cols and Rows are its size (0: 80x24).
	Cols, Rows uint16
	// Term, when set, is the TERM the process gets unless Exec.Env
	// names one (a caller forwards its user's, as the task shell does).
	Term string
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
	// Terminal, when set, runs the process on a new pseudo-terminal the
	// backend opens: its stdin, stdout, stderr and controlling terminal
	// are the terminal; Stdin is typed into it and what it shows goes to
	// Stdout (Stderr is unused). Process.Resize changes its size.
	Terminal *Terminal
	// TTY, without Terminal, makes Stdin (an *os.File: a terminal the
	// caller holds, as Spec.TTY's) the process's controlling terminal
	// in a session of its own; Stdout and Stderr are given as they are.
	TTY bool
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

// UsageSampler is implemented by a Sandbox that can read its live usage:
// every process of the sandbox together, as Spec.Usage samples a
// one-shot Run. ok is false when it cannot be read (no cgroup).
type UsageSampler interface {
	SampleUsage() (u Usage, ok bool)
}
