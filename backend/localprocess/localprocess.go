// Package localprocess is the local_process backend: it execs the argv
// directly (never through a shell) as the runner's user, in its own process
// group, with the empty-by-default environment the pipeline built, inside
// the job's snapshot directory. It enforces the timeout (TERM to the whole
// group, a grace period, then KILL) and cancellation, and nothing else: it
// is a policy and reproducibility boundary, not a sandbox. Its kept
// "sandbox" (sandbox.go) is a workspace directory and its execs' process
// groups, paused with SIGSTOP.
package localprocess

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Kind is the backend name.
const Kind = "local_process"

// drainWait bounds how long output pipes may stay open after the process
// group was killed (a child that escaped with setsid can hold them).
const drainWait = 2 * time.Second

func init() {
	backend.RegisterFactory(Kind, func(cfg backend.Config) (backend.Backend, error) { return New(cfg) })
}

// Backend is the local_process backend. The zero value is ready to use.
type Backend struct {
	// requireLimits makes the backend unavailable: it applies no memory,
	// CPU or process limits (backend.Config.RequireLimits).
	requireLimits bool
}

var _ backend.Backend = Backend{}

// New returns a local_process backend. It runs on the whole host, so
// the view fields of cfg (ReadOnly, Path, Masked) do not apply to it;
// with cfg.RequireLimits it is unavailable, as it cannot apply them.
func New(cfg backend.Config) (Backend, error) {
	return Backend{requireLimits: cfg.RequireLimits}, nil
}

// Kind implements backend.Backend.
func (Backend) Kind() string { return Kind }

// Capabilities implements backend.Backend: not isolating.
func (Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Enforces: []string{job.LimitTimeout, job.LimitOutput}}
}

// Available implements backend.Backend: local_process always is, unless
// the operator requires limits it cannot apply.
func (b Backend) Available(context.Context) error {
	if b.requireLimits {
		return errLimits
	}
	return nil
}

var errLimits = errors.New("local_process cannot apply memory, CPU or process limits, and the configuration requires them")

// notEnforced lists what this backend only records.
var notEnforced = []string{job.LimitNetwork, job.LimitMemory, job.LimitCPU, job.LimitProcesses, job.LimitFSWrite, job.LimitFSRead}

// Run implements backend.Backend.
func (b Backend) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	return b.run(ctx, spec, nil)
}

// run runs spec. With started nil the process group dies with the
// process (Run); otherwise started is called with the group once the
// process runs and the group is left to its owner (a Sandbox's Exec).
func (b Backend) run(ctx context.Context, spec backend.Spec, started func(pgid int)) (backend.Outcome, error) {
	out := backend.Outcome{Enforced: []string{job.LimitTimeout, job.LimitOutput}, NotEnforced: notEnforced}
	if spec.Limits.DiskBytes > 0 {
		// Recorded, like memory: the job writes to the runner's disk.
		out.NotEnforced = append(slices.Clip(notEnforced), job.LimitDisk)
	}
	if err := b.check(spec); err != nil {
		return out, err
	}
	if len(spec.Argv) == 0 {
		return out, job.Errorf(job.CodeRunSpawnFailed, "empty argv")
	}
	dir := filepath.Join(spec.Workspace.Dir, filepath.FromSlash(spec.Cwd))
	path := spec.Argv[0]
	if !filepath.IsAbs(path) {
		// A program inside the workspace, relative to the cwd.
		path = filepath.Join(dir, path)
		if !strings.HasPrefix(path, spec.Workspace.Dir+string(filepath.Separator)) {
			return out, job.Errorf(job.CodePathEscape, "program path leaves the workspace").With("argv0", spec.Argv[0])
		}
	}
	stdin, closeStdin, err := backend.StdinFile(spec.Stdin)
	if err != nil {
		return out, job.Wrap(job.CodeRunIOFailed, err, "cannot create the stdin pipe")
	}
	defer closeStdin()
	cmd := &exec.Cmd{
		Path:  path,
		Args:  spec.Argv,
		Env:   append([]string{}, spec.Env...),
		Dir:   dir,
		Stdin: stdin,
		// A session of its own: no controlling terminal, so /dev/tty never
		// reaches the operator's terminal; it is also the process group
		// the tree kill signals.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	drains, err := attachOutput(cmd, spec)
	if err != nil {
		return out, job.Wrap(job.CodeRunIOFailed, err, "cannot create output pipes")
	}
	if err := cmd.Start(); err != nil {
		drains.abort()
		return out, job.Wrap(job.CodeRunSpawnFailed, err, "cannot start process").With("argv0", spec.Argv[0])
	}
	drains.started()
	pgid := cmd.Process.Pid
	if started != nil {
		started(pgid)
	}

	reason := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		// Descendants seen at the first stop are remembered, so one whose
		// parent died of the TERM (and which was reparented away) still
		// gets the KILL.
		var tree []int
		reason <- backend.Supervise(ctx, spec.Limits, done, func(force bool) {
			sig := unix.SIGTERM
			if force {
				sig = unix.SIGKILL
			}
			tree = append(tree, descendants(pgid)...)
			_ = unix.Kill(-pgid, sig)
			for _, pid := range tree {
				_ = unix.Kill(pid, sig)
			}
		})
	}()
	waitErr := cmd.Wait()
	close(done)
	out.Reason = <-reason
	if started == nil {
		// Anything left in the group (background children) dies with the job.
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
	drains.wait(drainWait)
	st := cmd.ProcessState
	if st == nil {
		return out, job.Wrap(job.CodeRunIOFailed, waitErr, "process wait failed")
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		out.CPUTime = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		out.PeakMemoryBytes = ru.Maxrss * 1024
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		out.Signal = unix.SignalName(ws.Signal())
		if out.Reason == "" {
			out.Reason = job.ReasonSignal
		}
	default:
		code := st.ExitCode()
		out.ExitCode = &code
		if out.Reason == "" {
			out.Reason = job.ReasonExit
		}
	}
	return out, nil
}

// check refuses a Spec this backend cannot honour.
func (b Backend) check(spec backend.Spec) error {
	if b.requireLimits {
		return job.Wrap(job.CodeBackendUnavail, errLimits, "local_process is unavailable").With("backend", Kind)
	}
	if spec.Workspace.Overlay() {
		return job.Errorf(job.CodeBackendSetupFailed, "local_process cannot mount an overlay snapshot; use snapshot_strategy copy")
	}
	if len(spec.Binds) > 0 {
		// A symlink would let the workload write through a "read-only"
		// mount, and a cache shared by jobs of the runner's own user is no
		// boundary at all: refuse rather than pretend.
		return job.Errorf(job.CodeBackendSetupFailed, "local_process cannot bind directories (workspace.readonly_mounts, workspace.caches); use linux_sandbox").
			With("binds", len(spec.Binds))
	}
	return nil
}

// drains copies the child's stdout and stderr from pipes the runner owns,
// so Wait returns when the process exits even if a grandchild keeps the
// pipe open.
type drains struct {
	readers []*os.File
	writers []*os.File
	wg      sync.WaitGroup
}

func attachOutput(cmd *exec.Cmd, spec backend.Spec) (*drains, error) {
	d := &drains{}
	for i, w := range []io.Writer{spec.Stdout, spec.Stderr} {
		if w == nil {
			w = io.Discard
		}
		r, pw, err := os.Pipe()
		if err != nil {
			d.abort()
			return nil, err
		}
		d.readers = append(d.readers, r)
		d.writers = append(d.writers, pw)
		if i == 0 {
			cmd.Stdout = pw
		} else {
			cmd.Stderr = pw
		}
		d.wg.Add(1)
		go func(r *os.File, w io.Writer) {
			defer d.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					w.Write(buf[:n])
				}
				if err != nil {
					return
				}
			}
		}(r, w)
	}
	return d, nil
}

// started closes the runner's copies of the write ends.
func (d *drains) started() {
	for _, w := range d.writers {
		w.Close()
	}
}

func (d *drains) abort() {
	d.started()
	for _, r := range d.readers {
		r.Close()
	}
	d.wg.Wait()
}

// wait waits for both pipes to reach EOF, or closes them after max.
func (d *drains) wait(max time.Duration) {
	finished := make(chan struct{})
	go func() { d.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(max):
		for _, r := range d.readers {
			r.SetReadDeadline(time.Now())
		}
		<-finished
	}
	for _, r := range d.readers {
		r.Close()
	}
}
