// Package linuxsandbox is the linux_sandbox backend: agent-runner re-execs
// itself as a small init inside new user, mount, pid, net, ipc, uts and
// cgroup namespaces. The init builds a fresh tmpfs root holding read-only
// binds of the host toolchain (/usr, /bin, /lib*, /etc with secrets masked,
// /opt), the job's snapshot read-write at /workspace (on a tmpfs of the
// job's own size under a disk limit, disk.go), a size-capped tmpfs
// /tmp, a fresh /proc and a minimal /dev, pivot_roots into it, brings up
// loopback only, sets the namespace's own limits (no nested namespaces, a
// share of inotify), drops every capability, sets no_new_privs, applies
// Landlock and a seccomp allow-list (foreign ABIs killed), and runs the
// workload as an unprivileged uid in a new session (no controlling
// terminal). A root runner maps every concurrent sandbox onto a host
// uid/gid range of its own (idpool.go). The runner places the init in memory, pids
// and cpu cgroups (v1, or v2 on a unified host) before it starts anything, and reads back peak memory,
// CPU time and OOM kills. The init is pid 1 of the sandbox: when the
// workload exits, times out or is canceled, or the runner dies, every
// process in the sandbox dies with it.
//
// A kept sandbox (Create, backend.Sandboxes; sandbox.go) is built the same
// way, but its init stays pid 1 and serves a control socket: each Exec is
// one process it starts confined as the one-shot workload is; Pause and
// Resume use the cgroup freezer; Delete kills the init.
//
// A sandbox on an image (backend.Spec.Image, a root runner's; image.go)
// has an overlay of the image's root file system and a writable layer of
// its own as its root instead of the host view, and runs the image's
// user, root of its user namespace by default, with a small capability
// set.
package linuxsandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// Kind is the backend name.
const Kind = "linux_sandbox"

// initArg0 marks a process started as the sandbox init.
const initArg0 = "agent-runner-sandbox-init"

func init() {
	backend.RegisterFactory(Kind, func(cfg backend.Config) (backend.Backend, error) { return New(cfg) })
}

// Backend is the linux_sandbox backend. Its view is fixed by New: two
// instances in one process each bind their own.
type Backend struct {
	// toolchain and masked are the host view every sandbox gets;
	// readOnly and path the operator's part of it (backend.Config).
	toolchain []string
	masked    []string
	readOnly  []string
	path      []string
	// requireLimits refuses to run (backend.unavailable) when cgroup
	// limits cannot be applied, instead of reporting them not enforced.
	requireLimits bool
	// allowUnenforced runs a job whose memory, CPU or process limit
	// cannot be applied, reported not enforced; without it such a job
	// ends backend.unavailable before its code runs (limits.go).
	allowUnenforced bool
	// cgroups is where the backend learns its cgroups (nil: this
	// process's own; tests put fakes here).
	cgroups *cgroupHost

	probeMu sync.Mutex
	probed  bool
}

var _ backend.Backend = (*Backend)(nil)

// Kind implements backend.Backend.
func (b *Backend) Kind() string { return Kind }

// Capabilities implements backend.Backend.
func (b *Backend) Capabilities() backend.Capabilities {
	enforces := []string{job.LimitTimeout, job.LimitOutput, job.LimitNetwork, job.LimitFSWrite, job.LimitFSRead, job.LimitSyscalls}
	if landlockABI() > 0 {
		enforces = append(enforces, job.LimitLandlock, job.LimitShells)
	}
	if os.Getuid() == 0 {
		enforces = append(enforces, job.LimitHostIDs, job.LimitDisk)
	}
	if b.cgroupHost().writable() {
		enforces = append(enforces, job.LimitMemory, job.LimitCPU, job.LimitProcesses)
	}
	return backend.Capabilities{Isolating: true, Enforces: enforces, NetworkModes: []string{job.NetworkDisabled, job.NetworkAllowlist, job.NetworkHost}, Overlay: true, Binds: true,
		Images: os.Getuid() == 0}
}

// prepared is what the host holds for one sandbox from before its init
// starts until it is gone: its root directory, its id slot, its
// workspace disk, and the init's config.
type prepared struct {
	cfg    initConfig
	root   string
	slot   *idSlot
	disk   *workspaceDisk
	layers []string
	handed bool // the disk, to the caller
	// image is set for a sandbox on an image (image.go).
	image *hostImage
}

// workloadHostID is the host uid (and gid) the workload's files are
// given to: the slot's id of the workload's uid inside.
func (p *prepared) workloadHostID() int {
	if p.slot == nil {
		return -1
	}
	return p.slot.base + p.cfg.UID
}

// release frees what p holds but a disk handed to the caller.
func (p *prepared) release() {
	if p.slot != nil {
		p.slot.release()
	}
	if p.disk != nil && !p.handed {
		p.disk.close()
	}
	os.RemoveAll(p.root)
	if p.image != nil {
		os.RemoveAll(p.image.dir)
	}
}

// handDisk gives the workspace disk to the caller, as Outcome.Release.
func (p *prepared) handDisk() func() {
	p.handed = true
	return sync.OnceFunc(p.disk.close)
}

// prepare does the host's part of a sandbox's setup for spec: the
// network mode, the root directory, the disk, the id slot with the
// workspace handed to it, the egress socket and the binds.
func (b *Backend) prepare(spec backend.Spec) (_ *prepared, err error) {
	var egressSocket, egressCA string
	switch spec.Network {
	case "", job.NetworkDisabled, job.NetworkHost:
	case job.NetworkAllowlist:
		if spec.Egress == nil || spec.Egress.Socket == "" {
			return nil, job.Errorf(job.CodeBackendSetupFailed, "network allowlist needs an egress gateway for the run")
		}
		egressSocket, egressCA = spec.Egress.Socket, spec.Egress.CABundle
	default:
		return nil, job.Errorf(job.CodeNetworkDenied, "linux_sandbox does not know this network mode").With("network", spec.Network)
	}
	if err := execAllowAvailable(spec.Executables); err != nil {
		return nil, err
	}
	if err := shellDenyAvailable(spec, b.allowUnenforced); err != nil {
		return nil, err
	}
	if spec.Image != nil {
		if err := checkImage(spec, b.allowUnenforced); err != nil {
			return nil, err
		}
	}
	root, err := os.MkdirTemp("", "agent-runner-root-")
	if err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the sandbox root")
	}
	p := &prepared{root: root}
	defer func() {
		if err != nil {
			p.release()
		}
	}()
	// A disk limit puts the workspace on a tmpfs of its own (disk.go).
	if p.disk, err = b.newDisk(spec.Limits); err != nil {
		return nil, err
	}
	// A root runner maps the sandbox onto a host id range of its own;
	// an unprivileged one can only map itself.
	uid, gid := 0, 0
	if os.Getuid() == 0 {
		if p.slot, err = acquireSlot(); err != nil {
			return nil, err
		}
		uid, gid = workloadID, workloadID
		if spec.Image != nil {
			if p.image, err = prepareImage(*spec.Image, p.slot.base); err != nil {
				return nil, err
			}
			uid, gid = p.image.uid, p.image.gid
		}
		if p.disk != nil {
			if _, p.layers, err = p.disk.fill(spec.Workspace, p.slot.base+uid, layerOwner); err != nil {
				return nil, err
			}
		} else if err := giveWorkspace(spec.Workspace, p.slot.base+uid, layerOwner); err != nil {
			return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot hand the snapshot to the sandbox uid")
		}
		os.Chmod(root, 0o755)
		if err := rootReachable(root); err != nil {
			return nil, err
		}
	}
	slot := p.slot
	if slot != nil && egressSocket != "" {
		// The init's forwarder (the sandbox's root, host uid slot.base)
		// alone may connect; the runner sends the socket as a mount, so
		// no sandbox uid needs to reach its directory.
		if err := egress.GiveSocket(egressSocket, slot.base, slot.base); err != nil {
			return nil, err
		}
	}
	mounts, err := initBinds(spec.Binds, slot)
	if err != nil {
		return nil, err
	}
	p.cfg = initConfig{
		Root: root, Workspace: spec.Workspace.Dir,
		Lower: spec.Workspace.Lower, Upper: spec.Workspace.Upper, Work: spec.Workspace.Work,
		Toolchain: b.toolchain, Masked: b.masked, ReadOnly: append(append([]string{}, b.readOnly...), spec.ReadOnly...), Writable: spec.Writable,
		TmpBytes: spec.Limits.TmpBytes, UID: uid, GID: gid, TTY: spec.TTY, Binds: mounts,
		LayerFD: slot != nil && spec.Workspace.Overlay(), BindFDs: slot != nil,
		HostNetwork: spec.Network == job.NetworkHost, EgressSocket: egressSocket, EgressCA: egressCA,
		Executables: spec.Executables, Pinned: spec.Pinned,
	}
	if p.image != nil {
		// The image is the view: nothing of the host's is bound, and no
		// program is denied (checkImage).
		p.cfg.Image, p.cfg.ImageDir = true, p.image.dir
		p.cfg.Toolchain, p.cfg.Masked, p.cfg.ReadOnly = nil, nil, slices.Clone(spec.ReadOnly)
	} else if landlockABI() > 0 {
		p.cfg.DeniedPrograms, p.cfg.SearchPath = spec.DeniedPrograms, searchPath(spec.Env)
	}
	if err := checkHostMounts(p.cfg); err != nil {
		return nil, err
	}
	return p, nil
}

// booted is a started sandbox init, in its cgroups, with its config
// sent: from here it builds the sandbox.
type booted struct {
	cmd *exec.Cmd
	// started must be called once cmd was waited for (startOwnedBy).
	started func()
	// cg is nil where the limits could not be applied (and the backend
	// was allowed to run without them); cgName names its groups.
	cg     *cgroup
	cgName string
	// freezer pauses a kept sandbox; freezeErr says why there is none.
	freezer   *freezer
	freezeErr error
	// out holds what is and is not enforced.
	out backend.Outcome
}

// enforced lists the walls a sandbox of spec has or lacks, before its
// cgroups are known.
func enforced(spec backend.Spec, cfg initConfig, slot *idSlot, disk *workspaceDisk) backend.Outcome {
	out := backend.Outcome{Enforced: []string{job.LimitTimeout, job.LimitOutput, job.LimitFSWrite, job.LimitFSRead, job.LimitSyscalls}}
	walls := []struct {
		name string
		ok   bool
	}{{job.LimitNetwork, !cfg.HostNetwork}, {job.LimitLandlock, landlockABI() > 0}, {job.LimitHostIDs, slot != nil}}
	if spec.Limits.DiskBytes > 0 {
		walls = append(walls, struct {
			name string
			ok   bool
		}{job.LimitDisk, disk != nil})
	}
	for _, w := range walls {
		if w.ok {
			out.Enforced = append(out.Enforced, w.name)
		} else {
			out.NotEnforced = append(out.NotEnforced, w.name)
		}
	}
	return shellWall(out, spec)
}

// boot starts the sandbox init in its namespaces with its end
// of the control socket as fd 4, places it in its cgroups (and, when
// pausable, its freezer group), and sends it its mounts, layer, binds
// and config. On an error nothing of the init is left.
func (b *Backend) boot(spec backend.Spec, cfg initConfig, slot *idSlot, disk *workspaceDisk, console *os.File, fd4 *os.File, pausable bool) (booted, error) {
	in := booted{out: enforced(spec, cfg, slot, disk)}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return in, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the config pipe")
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{initArg0}
	cmd.Env = []string{}
	if console != nil {
		// A one-shot run's terminal, bound at /dev/console (buildDev).
		cmd.Stdin = console
	}
	cmd.ExtraFiles = []*os.File{cfgR, fd4}
	var layerSock *os.File
	if cfg.LayerFD || cfg.BindFDs || hasFDBinds(cfg.Binds) {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			cfgR.Close()
			cfgW.Close()
			return in, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the layer socket")
		}
		layerSock = os.NewFile(uintptr(pair[0]), "layer")
		defer layerSock.Close()
		initSock := os.NewFile(uintptr(pair[1]), "layer-init")
		defer initSock.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, initSock)
	}
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | unix.CLONE_NEWCGROUP,
		Pdeathsig: syscall.SIGKILL,
		// A new session: the sandbox never has the operator's terminal
		// as its controlling terminal (/dev/tty answers ENXIO).
		Setsid: true,
	}
	if !cfg.HostNetwork {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
	}
	if slot != nil {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: slot.base, Size: idRange}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: slot.base, Size: idRange}}
		// The runner's own kuid 0 is not in the map; become the mapped
		// root before exec so the init keeps its namespace capabilities.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
		// The workload drops its supplementary groups with setgroups.
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true
	} else {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	started := func() {}
	if slot != nil {
		started, err = startOwnedBy(cmd, slot.base)
	} else {
		err = cmd.Start()
	}
	cfgR.Close()
	if err != nil {
		cfgW.Close()
		return in, job.Wrap(job.CodeBackendUnavail, err, "cannot create the sandbox namespaces")
	}
	abort := func(err error) (booted, error) {
		cmd.Process.Kill()
		cfgW.Close()
		cmd.Wait()
		started()
		if in.cg != nil {
			go in.cg.remove()
			in.cg = nil
		}
		return in, err
	}
	in.cgName = cgroupName(spec.JobID, cmd.Process.Pid)
	cg, cgErr := b.cgroupHost().create(spec.JobID, cmd.Process.Pid, spec.Limits)
	if cgErr != nil {
		in.out.NotEnforced = append(in.out.NotEnforced, job.LimitMemory, job.LimitCPU, job.LimitProcesses)
		if err := b.refuseUnlimited(spec.Limits, cgErr); err != nil {
			return abort(err)
		}
	} else {
		in.out.Enforced = append(in.out.Enforced, job.LimitMemory, job.LimitCPU, job.LimitProcesses)
		in.cg = cg
	}
	if pausable {
		// A kept sandbox may be paused: its freezer group too, before
		// anything runs (freezer.go). Where there is none, Pause says so.
		in.freezer, in.freezeErr = newFreezer(b.cgroupHost(), in.cg, in.cgName, cmd.Process.Pid)
	} else {
		in.freezeErr = errors.New("a one-shot run's sandbox is never paused")
	}
	if cfg.BindFDs {
		// First on the socket: the init takes them before the layer.
		if err := sendHostMounts(layerSock, disk.replace(cfg.hostMounts())); err != nil {
			return abort(job.Wrap(job.CodeBackendSetupFailed, err, "cannot give the sandbox its directories"))
		}
	}
	if cfg.Image {
		// Next: the image's root file system, before the workspace layer.
		if err := sendImageLower(layerSock, spec.Image.RootFS, slot.base); err != nil {
			return abort(job.Wrap(job.CodeBackendUnavail, err, "linux_sandbox cannot mount the image's root file system idmapped here").
				With("backend", Kind).With("reason", err.Error()))
		}
	}
	if cfg.LayerFD {
		// Sent before the config: the init reads it while mounting.
		if err := sendIdmappedLayer(layerSock, spec.Workspace.Lower, slot.base); err != nil {
			return abort(job.Wrap(job.CodeBackendSetupFailed, err, "cannot give the sandbox its overlay layer"))
		}
	}
	if layerSock != nil {
		if err := sendBinds(layerSock, cfg.Binds, slot.base); err != nil {
			return abort(err) // coded by sendBinds
		}
	}
	// The init waits for its config, so it and everything it starts are
	// in the cgroups before any workload code runs.
	json.NewEncoder(cfgW).Encode(cfg)
	cfgW.Close()
	in.cmd, in.started = cmd, started
	return in, nil
}

// chownTree gives a snapshot to the sandbox's host uid.
func chownTree(dir string, id int) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, id, id)
	})
}

// traversable checks that every ancestor of dir can be searched by other
// users, for what the init binds by path as an unprivileged host uid: a
// request's read-only binds (binds.go). The job's own directories and the
// operator's view reach a root runner's init as mounts (hostmounts.go).
func traversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return job.Wrap(job.CodeBackendSetupFailed, err, "cannot stat a parent of a sandbox directory")
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return job.Errorf(job.CodeBackendSetupFailed, "the sandbox uid cannot reach %s: %s is not searchable by others (chmod o+x, or move the store)", dir, p).
				With("path", p)
		}
		if p == "/" {
			return nil
		}
	}
}

// giveWorkspace hands the job's writable directories to the sandbox's host
// uid id. An overlay's shared lower layer is given to layer once (a marker
// beside it records that; every sandbox sees it through an idmapped
// mount, see layer.go), its per-job upper and work dirs to id every time.
func giveWorkspace(ws backend.Workspace, id, layer int) error {
	if !ws.Overlay() {
		return chownTree(ws.Dir, id)
	}
	marker := filepath.Join(filepath.Dir(ws.Lower), fmt.Sprintf(".owner-%d", layer))
	if _, err := os.Stat(marker); err != nil {
		if err := chownTree(ws.Lower, layer); err != nil {
			return err
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{ws.Upper, ws.Work} {
		if err := os.Lchown(d, id, id); err != nil {
			return err
		}
	}
	return nil
}
