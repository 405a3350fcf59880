package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A copy-on-write bind (backend.Bind.CopyOnWrite: a request's
// workspace.readonly_mounts under readonly_mounts_mode "copy_on_write")
// is an overlay at its target: the host directory, read-only, is the
// lower layer; the upper and work dirs live on a tmpfs the init mounts in
// the sandbox's own mount namespace, sized like /tmp (the job's
// limits.tmp_mb) and shared by all of the job's copy-on-write binds.
// Nothing is ever written to the host directory: a file the workload
// changes is copied up into the tmpfs, and the tmpfs goes with the
// sandbox. The tmpfs is staged at cowDir on the sandbox root while the
// overlays are mounted and then detached, so the workload reaches the
// layers only through the overlays.
//
// A root runner sends the lower layer as a detached, read-only mount
// idmapped so the directory's owner and group are the workload's
// (sendCowLower): the workload may then create and change files anywhere
// in the merged tree, not only where the host's mode lets "others"
// write, and copy-up can give each copied file that owner inside the
// sandbox. An unprivileged runner's init binds it by path: files of the
// runner's uid are then the workload's already.

// cowDir is where the init stages the copy-on-write tmpfs.
const cowDir = "/.cow"

// cowStage is the init stage a copy-on-write mount fails in; the runner
// reports it as backend.unavailable (the host cannot give the job what
// it asked for), never by binding the directory read-only instead.
const cowStage = "copy_on_write"

// cowError marks a failure of the copy-on-write machinery itself (the
// tmpfs or the overlay), as opposed to the lower layer's bind.
type cowError struct{ err error }

func (e *cowError) Error() string { return "copy-on-write mount: " + e.err.Error() }
func (e *cowError) Unwrap() error { return e.err }

// cowScratch stages the copy-on-write binds of one sandbox, in the init.
type cowScratch struct {
	// root is the sandbox root being built (a host path until pivot).
	root string
	// size is the tmpfs's cap in bytes.
	size int64
	// uid and gid own each merged root (the workload's ids).
	uid, gid int
	// dir is the mounted tmpfs, "" until the first bind needs it.
	dir string
	n   int
}

func newCowScratch(root string, cfg initConfig) *cowScratch {
	return &cowScratch{root: root, size: tmpBytes(cfg), uid: cfg.UID, gid: cfg.GID}
}

// mount makes b an overlay at target: its lower layer attached at
// <tmpfs>/N/lower (received on the layer socket when b.FD, else bound
// by path through no symlink), its upper and work dirs beside it.
func (c *cowScratch) mount(b bindMount, target string) error {
	if c.dir == "" {
		dir := filepath.Join(c.root, cowDir)
		opts := "mode=0700,size=" + strconv.FormatInt(c.size, 10)
		if err := mountAt("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return &cowError{fmt.Errorf("tmpfs: %w", err)}
		}
		c.dir = dir
	}
	layer := filepath.Join(c.dir, strconv.Itoa(c.n))
	c.n++
	lower, upper, work := filepath.Join(layer, "lower"), filepath.Join(layer, "upper"), filepath.Join(layer, "work")
	for _, d := range []string{layer, upper, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return &cowError{err}
		}
	}
	var err error
	if b.FD {
		err = receiveLayer(lower)
	} else {
		err = bindNoSymlinks(b.Source, lower, true)
	}
	if err != nil {
		return fmt.Errorf("lower layer: %w", err)
	}
	// The merged root is the upper dir itself (never copied up): it
	// takes the lower root's mode, with the owner's bits set, and the
	// workload as owner, so the workload can create entries at the top.
	// Below it every directory is the lower's, as the sandbox sees it.
	var st unix.Stat_t
	if err := unix.Stat(lower, &st); err != nil {
		return fmt.Errorf("lower layer: %w", err)
	}
	if err := os.Chown(upper, c.uid, c.gid); err != nil {
		return &cowError{err}
	}
	if err := os.Chmod(upper, os.FileMode(st.Mode&0o777|0o700)); err != nil {
		return &cowError{err}
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := mountOverlay(target, lower, upper, work); err != nil {
		return &cowError{fmt.Errorf("overlay: %w", err)}
	}
	return nil
}

// detach lets the staging tmpfs and the lower layers' mounts go: the
// overlays hold their own references to them.
func (c *cowScratch) detach() error {
	if c.dir == "" {
		return nil
	}
	if err := unix.Unmount(c.dir, unix.MNT_DETACH); err != nil {
		return &cowError{fmt.Errorf("detach the staging tmpfs: %w", err)}
	}
	return os.Remove(c.dir)
}

// sendCowLower passes the init, over its layer socket, a detached,
// read-only mount of dir (opened through no symlink: the runner resolved
// it when it checked it) idmapped so that dir's owner and group are the
// slot's workload uid and gid; every other id is nobody's there.
func sendCowLower(sock *os.File, dir string, base int) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	userns, err := idmapUserns(int(st.Uid), int(st.Gid), base+workloadID)
	if err != nil {
		return err
	}
	defer unix.Close(userns)
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", dir, err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{
		Attr_set:    unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd:   uint64(userns),
		Propagation: unix.MS_PRIVATE,
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmap %s: %w", dir, err)
	}
	return unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(tree), nil, 0)
}
