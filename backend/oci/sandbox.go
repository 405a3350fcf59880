package oci

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Sandbox is one container of a runtime.
type Sandbox struct {
	b    *Backend
	spec backend.Spec
	rt   string
	// id is the container's id, dir its bundle, cgroup its cgroupsPath;
	// slot its host ids (runc), pid its init's host pid.
	id     string
	dir    string
	cgroup string
	slot   *slot
	pid    int
	egress *bridge
	// unenforced: the cgroup limits did not land and the operator
	// allowed that.
	unenforced bool

	mu      sync.Mutex
	deleted bool
	// running is closed while the sandbox is not paused.
	running chan struct{}
	execs   sync.WaitGroup
	n       int
}

var _ backend.Sandbox = (*Sandbox)(nil)

// Create implements backend.Sandboxes.
func (b *Backend) Create(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	if err := b.check(spec); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(spec.Workspace.Dir); err != nil || !fi.IsDir() {
		return nil, job.Errorf(job.CodeBackendSetupFailed, "the workspace %s is not a directory", spec.Workspace.Dir)
	}
	rt := runtimeOf(spec)
	if err := RuntimeAvailable(ctx, rt); err != nil {
		return nil, job.Wrap(job.CodeBackendUnavail, err, "the OCI runtime is unavailable").With("runtime", rt).With("reason", err.Error())
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	id := "ar-" + hex.EncodeToString(rnd[:])
	s := &Sandbox{b: b, spec: spec, rt: rt, id: id, dir: filepath.Join(b.dir, id), cgroup: "/agent-runner-oci/" + id, running: make(chan struct{})}
	close(s.running)
	if err := s.create(ctx); err != nil {
		s.cleanup()
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the sandbox").With("runtime", rt)
	}
	return s, nil
}

// create builds the bundle and starts the container's init.
func (s *Sandbox) create(ctx context.Context) error {
	if err := os.MkdirAll(s.b.dir, 0o711); err != nil {
		return err
	}
	if err := os.Mkdir(s.dir, 0o711); err != nil {
		return err
	}
	init := filepath.Join(s.dir, "init")
	if err := os.WriteFile(init, initELF(), 0o755); err != nil {
		return err
	}
	base := 0
	if s.rt == RuntimeRunc {
		sl, err := acquireSlot(filepath.Join(s.b.run, "ids"))
		if err != nil {
			return err
		}
		s.slot, base = sl, sl.base
		if err := mountRoot(s.dir, s.spec.Image.RootFS, init, base); err != nil {
			return err
		}
		if err := giveWorkspace(s.spec.Workspace.Dir, base); err != nil {
			return fmt.Errorf("give the workspace to the sandbox's root: %w", err)
		}
	}
	cfg := bundleConfig(s.spec, s.rt, base, s.cgroup)
	if err := writeJSON(filepath.Join(s.dir, "config.json"), cfg); err != nil {
		return err
	}
	pidFile := filepath.Join(s.dir, "init.pid")
	if err := s.runtime(ctx, "create", "--bundle", s.dir, "--pid-file", pidFile, s.id); err != nil {
		return err
	}
	pid, err := readPid(pidFile)
	if err != nil {
		return err
	}
	s.pid = pid
	if err := checkLimits(s.cgroup, s.spec.Limits); err != nil {
		if !s.b.cfg.AllowUnenforcedLimits {
			return err
		}
		s.unenforced = true
	}
	if s.spec.Egress != nil {
		br, err := newBridge(s.pid, s.spec.Egress.Socket)
		if err != nil {
			return err
		}
		s.egress = br
	}
	return s.runtime(ctx, "start", s.id)
}

// globalFlags are the runtime's flags before its subcommand.
func (s *Sandbox) globalFlags() []string {
	flags := []string{"--root", filepath.Join(s.b.run, s.rt)}
	if s.rt == RuntimeRunsc {
		flags = append(flags, "--network=none", "--overlay2=root:memory", "--platform=ptrace")
	}
	return flags
}

// command is the runtime with args.
func (s *Sandbox) command(args ...string) *exec.Cmd {
	return exec.Command(s.rt, append(s.globalFlags(), args...)...)
}

// runtime runs one runtime command to its end. Its stderr is a file,
// not a pipe: the container's init inherits the stdio of `create`, and
// would hold a pipe open for the sandbox's life.
func (s *Sandbox) runtime(ctx context.Context, args ...string) error {
	errf, err := os.CreateTemp("", "agent-runner-oci-")
	if err != nil {
		return err
	}
	defer errf.Close()
	os.Remove(errf.Name())
	cmd := s.command(args...)
	cmd.Stderr = errf
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile("/proc/self/fd/" + strconv.Itoa(int(errf.Fd())))
		if len(msg) > 4096 {
			msg = msg[:4096]
		}
		return fmt.Errorf("%s %s: %w: %s", s.rt, args[0], err, strings.TrimSpace(string(msg)))
	}
	return nil
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// ID implements backend.Sandbox.
func (s *Sandbox) ID() string { return s.spec.JobID }

// enter waits for a paused sandbox to resume, then counts an exec in
// so that Delete waits for it.
func (s *Sandbox) enter(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.deleted {
			s.mu.Unlock()
			return errDeleted(s.ID())
		}
		running := s.running
		select {
		case <-running:
			s.execs.Add(1)
			s.n++
			s.mu.Unlock()
			return nil
		default:
		}
		s.mu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return job.Wrap(job.CodeRunCanceled, ctx.Err(), "canceled while the sandbox was paused")
		}
	}
}

// Pause implements backend.Sandbox with the runtime's pause (the
// freezer cgroup).
func (s *Sandbox) Pause(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return errDeleted(s.ID())
	}
	if !isClosed(s.running) {
		return nil
	}
	if err := s.runtime(ctx, "pause", s.id); err != nil {
		return job.Wrap(job.CodeBackendUnavail, err, "cannot pause the sandbox")
	}
	s.running = make(chan struct{})
	return nil
}

// Resume implements backend.Sandbox.
func (s *Sandbox) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return errDeleted(s.ID())
	}
	if isClosed(s.running) {
		return nil
	}
	if err := s.runtime(ctx, "resume", s.id); err != nil {
		return job.Wrap(job.CodeBackendSetupFailed, err, "cannot resume the sandbox")
	}
	close(s.running)
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ReadFile implements backend.Sandbox through the workspace directory.
func (s *Sandbox) ReadFile(ctx context.Context, rel string, w io.Writer, limit int64) error {
	if err := s.live(); err != nil {
		return err
	}
	return backend.ReadWorkspaceFile(ctx, s.spec.Workspace.Dir, rel, w, limit)
}

// WriteFile implements backend.Sandbox: the file is written through the
// workspace directory, then given to the sandbox's root.
func (s *Sandbox) WriteFile(ctx context.Context, rel string, r io.Reader, mode fs.FileMode) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := backend.WriteWorkspaceFile(ctx, s.spec.Workspace.Dir, rel, r, mode); err != nil {
		return err
	}
	if s.slot == nil {
		return nil
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, filepath.Join(s.spec.Workspace.Dir, filepath.Clean("/"+rel)), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot give the file to the sandbox").With("path", rel)
	}
	defer unix.Close(fd)
	if err := unix.Fchownat(fd, "", s.slot.base, s.slot.base, unix.AT_EMPTY_PATH); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot give the file to the sandbox").With("path", rel)
	}
	return nil
}

// Delete implements backend.Sandbox: it kills the container (every
// process with it), deletes it and frees what Create made.
func (s *Sandbox) Delete(ctx context.Context) error {
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return nil
	}
	s.deleted = true
	if !isClosed(s.running) {
		close(s.running)
	}
	s.mu.Unlock()
	s.cleanup()
	s.execs.Wait()
	return nil
}

// cleanup removes the container and what Create made, whatever of it
// was made.
func (s *Sandbox) cleanup() {
	ctx := context.Background()
	_ = s.runtime(ctx, "delete", "--force", s.id)
	if s.egress != nil {
		s.egress.close()
	}
	unmountRoot(s.dir)
	_ = os.RemoveAll(s.dir)
	if s.slot != nil {
		s.slot.release()
	}
}

func (s *Sandbox) live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return errDeleted(s.ID())
	}
	return nil
}

// outcome is an outcome with what this sandbox enforces.
func (s *Sandbox) outcome() backend.Outcome {
	enforced := []string{job.LimitTimeout, job.LimitOutput, job.LimitNetwork, job.LimitFSWrite, job.LimitFSRead, job.LimitSyscalls}
	if s.rt == RuntimeRunc {
		enforced = append(enforced, job.LimitHostIDs)
	}
	lim := s.spec.Limits
	var not []string
	for _, l := range []struct {
		name string
		set  bool
	}{{job.LimitMemory, lim.MemoryBytes > 0}, {job.LimitCPU, lim.CPUCount > 0}, {job.LimitProcesses, lim.MaxProcesses > 0}} {
		switch {
		case l.set && s.unenforced:
			not = append(not, l.name)
		case l.set:
			enforced = append(enforced, l.name)
		}
	}
	if s.spec.DeniedPrograms != nil {
		not = append(not, job.LimitShells)
	}
	if lim.DiskBytes > 0 {
		not = append(not, job.LimitDisk)
	}
	return backend.Outcome{Enforced: enforced, NotEnforced: not}
}

func errDeleted(id string) error {
	return job.Errorf(job.CodeJobNotFound, "sandbox %s was deleted", id).With("sandbox", id)
}
