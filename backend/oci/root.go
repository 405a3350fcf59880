package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Host ids: a runc sandbox's user namespace maps its ids 0..65535 to a
// range of host ids held for it alone (a slot), beyond linux_sandbox's
// (which end below 70,000,000), so two sandboxes never share a host uid
// and no workload is ever a host user. Slots are held with flock on a
// file each, so separate runner processes never pick the same one.
const (
	idBase  = 100_000_000
	idRange = 65536
	idSlots = 1024
)

// slot is a host id range held for one sandbox.
type slot struct {
	base int
	lock *os.File
}

func (s *slot) release() { s.lock.Close() }

// acquireSlot holds a free slot, trying from a random one.
func acquireSlot(dir string) (*slot, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	start := rand.IntN(idSlots)
	for i := range idSlots {
		k := (start + i) % idSlots
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(k)), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return nil, err
		}
		return &slot{base: idBase + k*idRange, lock: f}, nil
	}
	return nil, fmt.Errorf("all %d host id ranges are in use", idSlots)
}

// usernsFD returns (the caller closes it) a user namespace that maps ids
// 0..65535 to host ids base and up, as the sandbox's own will: an
// idmapped mount made with it shows the image's root-owned files as
// owned by the sandbox's root. It is held by a child running init (the
// program at initPath), killed once the namespace is open.
func usernsFD(initPath string, base int) (int, error) {
	cmd := exec.Command(initPath)
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: base, Size: idRange}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("start a process in a new user namespace: %w", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the user namespace: %w", err)
	}
	return fd, nil
}

// mountIdmapped mounts src read-only (nosuid, nodev) at target, its ids
// shifted through the user namespace userns.
func mountIdmapped(src, target string, userns int) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmap %s: %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount %s: %w", target, err)
	}
	return nil
}

// mountRoot builds a runc sandbox's root at dir/rootfs: an overlay of
// Image.RootFS, idmapped to the slot (dir/lower), under a writable
// layer of its own (dir/upper) owned by the sandbox's root.
func mountRoot(dir, rootfs, initPath string, base int) error {
	lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs")
	for _, d := range []string{lower, upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	st, err := os.Stat(rootfs)
	if err != nil {
		return fmt.Errorf("the image's root: %w", err)
	}
	// The top of the upper layer is the root directory's owner and mode.
	sys := st.Sys().(*syscall.Stat_t)
	if err := os.Lchown(upper, base+int(sys.Uid), base+int(sys.Gid)); err != nil {
		return err
	}
	if err := os.Chmod(upper, st.Mode()&fs.ModePerm); err != nil {
		return err
	}
	userns, err := usernsFD(initPath, base)
	if err != nil {
		return err
	}
	defer unix.Close(userns)
	if err := mountIdmapped(rootfs, lower, userns); err != nil {
		return err
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the overlay root: %w", err)
	}
	return nil
}

// unmountRoot undoes mountRoot (what of it was done).
func unmountRoot(dir string) {
	for _, d := range []string{"rootfs", "lower"} {
		_ = unix.Unmount(filepath.Join(dir, d), unix.MNT_DETACH)
	}
}

// giveWorkspace makes the workspace the sandbox root's (host uid base):
// its directory and everything in it, never following a symlink.
func giveWorkspace(ws string, base int) error {
	return filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, base, base)
	})
}
