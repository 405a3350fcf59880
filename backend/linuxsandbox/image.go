package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// A sandbox on an image (backend.Spec.Image) has the image's root file
// system as its root instead of the host view: an overlay whose lower
// layer is the image store's read-only directory and whose upper and
// work dirs are a host directory of the sandbox's own (imageDir),
// removed when the sandbox is. The runner sends the lower layer to the
// init as a detached, read-only mount idmapped over the slot's whole
// range (on-disk id n is the sandbox's id n, host id base+n), so the
// image's root-owned files are the sandbox root's and nothing is ever
// chowned or written in the store. The workload runs as the image's
// user, root (uid 0 of the sandbox's user namespace, host uid base)
// unless the image names another, with imageCaps in its bounding set:
// capabilities over its own namespace's files and processes only, and
// never over the host's (the kernel checks every one against the
// namespace that owns the object). no_new_privs, seccomp, the cgroups,
// the network namespace and the egress bridge are as for the host
// view. Landlock grants the whole root (restrictLandlockImage).
//
// What cannot hold against root with a writable root is refused
// (checkImage): an exec allow-list (policy.exec_scope every_process:
// root can rewrite an allowed program, or hand the ELF interpreter a
// file it wrote, on a root that must stay executable for its own
// installs) and denied programs (policy.allow_shell false: root can
// install a shell under any name), unless the operator allows limits
// that are not enforced, which then lists "shells" not enforced.

// imageCaps are the capabilities root inside an image sandbox keeps:
// those a package manager and its maintainer scripts need on the
// sandbox's own files and processes (Docker's default set without
// mknod, raw sockets, chroot and audit, which the kernel, seccomp or
// the network namespace refuse anyway).
var imageCaps = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_KILL,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP, unix.CAP_SETFCAP, unix.CAP_NET_BIND_SERVICE,
}

// hostImage is what the runner prepared for a sandbox on an image.
type hostImage struct {
	img backend.Image
	// uid and gid are the image user's, inside the sandbox.
	uid, gid int
	// dir holds the root's upper and work dirs.
	dir string
}

// checkImage refuses what a sandbox on an image cannot hold.
func checkImage(spec backend.Spec, allowUnenforced bool) error {
	unavailable := func(reason, msg string) *job.Error {
		return job.Errorf(job.CodeBackendUnavail, "linux_sandbox on an image: %s", msg).With("backend", Kind).With("reason", reason)
	}
	var err *job.Error
	switch {
	case os.Getuid() != 0:
		err = unavailable("not root", "only a root runner runs images (each sandbox needs a host id range of its own for the image's files)")
	case spec.Executables != nil:
		err = unavailable("exec allow-list on a writable root", "policy.exec_scope every_process cannot hold on a root the workload owns (root can rewrite an allowed program or run its own through the ELF interpreter); use exec_scope argv0")
	case spec.DeniedPrograms != nil && !allowUnenforced:
		err = unavailable("denied programs on a writable root", "policy.allow_shell false cannot hold on a root the workload owns (root can install a shell under any name); set allow_shell true, or run with --allow-unenforced-limits to check the command line only").
			With("not_enforced", []string{job.LimitShells})
	}
	if err == nil {
		return nil
	}
	return err
}

// prepareImage resolves the image's user inside its root file system
// and makes the directory of the root's upper and work dirs, the upper
// owned (through the slot's range) and moded as the image's root
// directory, the work dir the sandbox root's.
func prepareImage(img backend.Image, base int) (_ *hostImage, err error) {
	rootfd, err := unix.Openat2(unix.AT_FDCWD, img.RootFS, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot open the image's root file system").With("image", img.Ref)
	}
	defer unix.Close(rootfd)
	uid, gid, err := imageUser(rootfd, img.User)
	if err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot run the image's user: "+err.Error()).With("image", img.Ref).With("user", img.User)
	}
	var st unix.Stat_t
	if err := unix.Fstat(rootfd, &st); err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot stat the image's root")
	}
	dir, err := os.MkdirTemp("", "agent-runner-image-")
	if err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the sandbox's root layer")
	}
	h := &hostImage{img: img, uid: uid, gid: gid, dir: dir}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	owner, group := base+int(st.Uid), base+int(st.Gid)
	if st.Uid >= idRange || st.Gid >= idRange {
		owner, group = base, base
	}
	steps := []func() error{
		func() error { return os.Mkdir(upper, 0o700) },
		func() error { return os.Mkdir(work, 0o700) },
		func() error { return os.Chown(upper, owner, group) },
		func() error {
			return os.Chmod(upper, os.FileMode(st.Mode&0o7777)&^os.FileMode(unix.S_ISUID|unix.S_ISGID))
		},
		func() error { return os.Chown(work, base, base) },
		func() error { return os.Chown(dir, base, base) },
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the sandbox's root layer")
		}
	}
	return h, nil
}

// rangeMaps caches, per slot, a user namespace mapping ids 0..idRange-1
// to the slot's range, for the image's idmapped mount.
var rangeMaps struct {
	sync.Mutex
	fds map[int]int
}

func rangeUserns(base int) (int, error) {
	rangeMaps.Lock()
	defer rangeMaps.Unlock()
	if fd, ok := rangeMaps.fds[base]; ok {
		return fd, nil
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: base, Size: idRange}}
	fd, err := holdIDMap(m, m)
	if err != nil {
		return -1, err
	}
	if rangeMaps.fds == nil {
		rangeMaps.fds = map[int]int{}
	}
	rangeMaps.fds[base] = fd
	return fd, nil
}

// sendImageLower passes the init a detached, read-only, nosuid, nodev
// mount of the image's root file system idmapped onto the slot's range.
func sendImageLower(sock *os.File, rootfs string, base int) error {
	userns, err := rangeUserns(base)
	if err != nil {
		return err
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns), Propagation: unix.MS_PRIVATE,
	}
	return sendDetached(sock, rootfs, unix.AT_SYMLINK_NOFOLLOW, &attr)
}

// imageRootStage is the init stage an image root's overlay fails in: the
// runner reports it as backend.unavailable (this kernel cannot stack
// the overlay in a user namespace), never running on another root.
const imageRootStage = "image_root"

// imageRootError marks the overlay of an image's root failing.
type imageRootError struct{ err error }

func (e *imageRootError) Error() string { return "image root overlay: " + e.err.Error() }
func (e *imageRootError) Unwrap() error { return e.err }

// imageStage is where the init stages the image's layers (on a small
// tmpfs over cfg.Root) before the overlay is stacked from them.
const imageStage = "stage"

// mountImageRoot, in the init, builds the sandbox's root from the
// image: the lower layer received on the layer socket (after the host
// mounts), the upper and work dirs from the mount of cfg.ImageDir, an
// overlay of them at <cfg.Root>/root, which it returns. The staging
// mounts are detached: the overlay keeps its own references, and the
// workload never reaches a layer but through it.
func mountImageRoot(cfg initConfig, r received) (string, error) {
	if err := unix.Mount("tmpfs", cfg.Root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=1m"); err != nil {
		return "", fmt.Errorf("stage tmpfs: %w", err)
	}
	stage := filepath.Join(cfg.Root, imageStage)
	lower, up, merged := filepath.Join(stage, "lower"), filepath.Join(stage, "up"), filepath.Join(cfg.Root, "root")
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return "", err
	}
	if err := receiveLayer(lower); err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	if err := r.bind(cfg.ImageDir, up, false); err != nil {
		return "", fmt.Errorf("image layer: %w", err)
	}
	if err := os.Mkdir(merged, 0o755); err != nil {
		return "", err
	}
	if err := mountOverlay(merged, lower, filepath.Join(up, "upper"), filepath.Join(up, "work")); err != nil {
		return "", &imageRootError{err}
	}
	for _, m := range []string{lower, up} {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			return "", fmt.Errorf("detach %s: %w", m, err)
		}
	}
	return merged, nil
}
