package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// A root runner's sandbox init runs as a host uid of its own, which
// cannot search a private (0700) directory above the store, the egress
// gateway's socket or an operator's read-only directory under /root. So
// the runner, which can, makes a detached mount (open_tree with
// OPEN_TREE_CLONE) of each of the job's bind sources, sets its
// attributes (read-only, nosuid, nodev, private propagation), and hands
// it to the init on the layer socket; the init attaches it with
// move_mount, looking no path up. (A plain O_PATH descriptor bound
// through /proc/self/fd/N would not do: its mount belongs to the
// runner's mount namespace, and a bind from another namespace's mount is
// refused with EINVAL.) Each descriptor is closed once attached, and all
// are close-on-exec: the workload never holds one. An unprivileged
// runner's init has the runner's own uid, so it binds by path.

// hostMount is one bind source a root runner sends as a detached mount.
type hostMount struct {
	Source   string
	ReadOnly bool
	NoExec   bool
	// NoFollow refuses a symlink as the last component (the job's own
	// directories, which the runner created).
	NoFollow bool
	// disk, in the runner, is sent instead of a clone of Source: the
	// job's size-limited workspace (its attributes set by fsmount).
	disk *workspaceDisk
}

// hostMounts lists the bind sources in the order the runner sends them
// and the init receives them: the snapshot (or the directory holding an
// overlay's upper and work dirs), the read-only and writable directories,
// the egress socket and CA bundle. Each source appears once.
func (c initConfig) hostMounts() []hostMount {
	var out []hostMount
	seen := map[string]bool{}
	add := func(m hostMount) {
		if m.Source != "" && !seen[m.Source] {
			seen[m.Source] = true
			out = append(out, m)
		}
	}
	if c.Lower != "" {
		add(hostMount{Source: filepath.Dir(c.Upper), NoFollow: true})
	} else {
		add(hostMount{Source: c.Workspace, NoFollow: true})
	}
	add(hostMount{Source: c.ImageDir, NoFollow: true})
	for _, d := range c.ReadOnly {
		add(hostMount{Source: d, ReadOnly: true})
	}
	for _, d := range c.Writable {
		add(hostMount{Source: d})
	}
	add(hostMount{Source: c.EgressSocket, ReadOnly: true, NoExec: true})
	add(hostMount{Source: c.EgressCA, ReadOnly: true, NoExec: true})
	return out
}

// checkHostMounts refuses what the init could not attach: an overlay
// whose upper and work dirs do not share a parent (overlayfs wants both
// on one mount).
func checkHostMounts(c initConfig) error {
	if c.Lower != "" && filepath.Dir(c.Upper) != filepath.Dir(c.Work) {
		return job.Errorf(job.CodeBackendSetupFailed, "overlay upper %s and work %s must share a parent directory", c.Upper, c.Work)
	}
	return nil
}

// sendHostMounts passes a detached mount of every source to the init, one
// message each, in order.
func sendHostMounts(sock *os.File, mounts []hostMount) error {
	for _, m := range mounts {
		if err := sendHostMount(sock, m); err != nil {
			return err
		}
	}
	return nil
}

func sendHostMount(sock *os.File, m hostMount) error {
	if m.disk != nil {
		return unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(m.disk.fd), nil, 0)
	}
	flags := uint(unix.AT_RECURSIVE)
	if m.NoFollow {
		flags |= unix.AT_SYMLINK_NOFOLLOW
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Propagation: unix.MS_PRIVATE}
	if m.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if m.NoExec {
		attr.Attr_set |= unix.MOUNT_ATTR_NOEXEC
	}
	return sendDetached(sock, m.Source, flags, &attr)
}

// received holds, in the init, the detached mounts the runner sent, by
// source path (attached once bound); nil (an unprivileged runner) binds
// every source by path.
type received map[string]int

// attached marks a source whose mount is in place.
const attached = -1

// receiveHostMounts takes one mount per source from the layer socket.
func receiveHostMounts(mounts []hostMount) (received, error) {
	r := received{}
	for _, m := range mounts {
		fd, err := receiveFD()
		if err != nil {
			r.close()
			return nil, fmt.Errorf("receive %s: %w", m.Source, err)
		}
		r[m.Source] = fd
	}
	return r, nil
}

func receiveFD() (int, error) {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(layerFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no descriptor (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no descriptor (%v)", err)
	}
	return fds[0], nil
}

// bind makes src visible at target: the mount the runner sent (its
// attributes already set), else a bind by path (ro read-only).
func (r received) bind(src, target string, ro bool) error {
	fd, ok := r[src]
	switch {
	case !ok:
		return bind(src, target, ro)
	case fd == attached:
		return nil // listed twice: bound at the same path already
	}
	r[src] = attached
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.MkdirAll(target, 0o755)
	} else {
		err = touch(target)
	}
	if err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", src, err)
	}
	return nil
}

// has reports whether src arrived as a mount.
func (r received) has(src string) bool {
	fd, ok := r[src]
	return ok && fd != attached
}

// close releases the mounts not attached.
func (r received) close() {
	for src, fd := range r {
		if fd != attached {
			unix.Close(fd)
		}
		delete(r, src)
	}
}

// rootReachable checks that the sandbox's uid can search every parent of
// the root's mount point, the one host path the init still looks up
// itself besides the toolchain (it is made in $TMPDIR).
func rootReachable(root string) error {
	for p := filepath.Dir(root); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return job.Wrap(job.CodeBackendSetupFailed, err, "cannot stat a parent of the sandbox root")
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return job.Errorf(job.CodeBackendSetupFailed, "the sandbox uid cannot reach its root mount point %s: %s is not searchable by others (set TMPDIR to a directory it can search, such as /tmp)", root, p).
				With("path", p)
		}
		if p == "/" {
			return nil
		}
	}
}

// replace sends the job's disk (disk.go) in place of a clone of the
// workspace, the first mount; nil d changes nothing.
func (d *workspaceDisk) replace(mounts []hostMount) []hostMount {
	if d != nil && len(mounts) > 0 {
		mounts[0].disk = d
	}
	return mounts
}
