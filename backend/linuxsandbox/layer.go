package linuxsandbox

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// An overlay snapshot's lower layer is shared by every job of the same
// workspace content, while each sandbox runs under a host uid range of
// its own: no single owner of the layer's files suits them all. So a root
// runner leaves the layer owned on disk by layerOwner, an id outside the
// pool that no sandbox or host user has, and hands each sandbox an
// idmapped, read-only mount of it in which layerOwner's files belong to
// that sandbox's workload uid. Files the job changes are copied up into
// its own upper layer, owned by its own range; the layer itself never
// changes owner again.
const layerOwner = idPoolBase - idRange + workloadID

// holderArg0 marks a process started only to hold a user namespace.
const holderArg0 = "agent-runner-userns-holder"

// holdUserns, when this binary is started as a holder, waits for its
// stdin to close: the runner opens the namespace meanwhile.
func holdUserns() {
	var b [1]byte
	os.Stdin.Read(b[:])
	os.Exit(0)
}

// layerMaps caches, per slot, a user namespace that maps layerOwner to
// the slot's workload uid (the fds live as long as the process; at most
// one per slot).
var layerMaps struct {
	sync.Mutex
	fds map[int]int
}

// layerUserns returns the namespace fd for the slot whose range starts
// at base, creating it on first use.
func layerUserns(base int) (int, error) {
	layerMaps.Lock()
	defer layerMaps.Unlock()
	if fd, ok := layerMaps.fds[base]; ok {
		return fd, nil
	}
	fd, err := idmapUserns(layerOwner, layerOwner, base+workloadID)
	if err != nil {
		return -1, err
	}
	if layerMaps.fds == nil {
		layerMaps.fds = map[int]int{}
	}
	layerMaps.fds[base] = fd
	return fd, nil
}

// idmapUserns returns (the caller closes it) a new user namespace that
// maps uid and gid to the host id to: in an idmapped mount made with it,
// the files owned on disk by uid and gid belong to host id to, and every
// other file to nobody.
func idmapUserns(uid, gid, to int) (int, error) {
	uids := []syscall.SysProcIDMap{{ContainerID: uid, HostID: to, Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: gid, HostID: to, Size: 1}}
	return holdIDMap(uids, gids)
}

// holdIDMap returns (the caller closes it) a new user namespace with
// the maps uids and gids, held by a short-lived process.
func holdIDMap(uids, gids []syscall.SysProcIDMap) (int, error) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{holderArg0}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER, UidMappings: uids, GidMappings: gids, Pdeathsig: syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return -1, err
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("start the id-map holder: %w", err)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	stdin.Close()
	cmd.Wait()
	if err != nil {
		return -1, fmt.Errorf("open the id map: %w", err)
	}
	return fd, nil
}

// sendIdmappedLayer passes the init, over its layer socket, a detached,
// read-only mount of lower in which layerOwner's files belong to the
// slot's workload uid; the init attaches it (see receiveLayer) and stacks
// the overlay on it.
func sendIdmappedLayer(sock *os.File, lower string, base int) error {
	return sendIdmapped(sock, lower, base, unix.MOUNT_ATTR_RDONLY)
}

// sendIdmapped sends a detached mount of dir, idmapped so layerOwner's
// files belong to the slot's workload uid, with nosuid, nodev and extra
// (e.g. read-only) set.
func sendIdmapped(sock *os.File, dir string, base int, extra uint64) error {
	userns, err := layerUserns(base)
	if err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | extra, Userns_fd: uint64(userns)}
	return sendDetached(sock, dir, unix.AT_SYMLINK_NOFOLLOW, &attr)
}

// sendDetached clones the mount at dir (open_tree; openFlags adds to
// OPEN_TREE_CLONE, e.g. AT_RECURSIVE), sets attr on the copy
// (mount_setattr, recursively when AT_RECURSIVE is given) and sends it to
// the init over sock: every host directory a root runner gives a
// sandbox travels this way, so the sandbox's uid never walks its path.
func sendDetached(sock *os.File, dir string, openFlags uint, attr *unix.MountAttr) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|openFlags)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", dir, err)
	}
	defer unix.Close(fd)
	setFlags := unix.AT_EMPTY_PATH
	if openFlags&unix.AT_RECURSIVE != 0 {
		setFlags |= unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(fd, "", uint(setFlags), attr); err != nil {
		return fmt.Errorf("set the mount attributes of %s: %w", dir, err)
	}
	return unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(fd), nil, 0)
}

// layerFD is the init's end of the layer socket.
const layerFD = 5

// receiveLayer takes the mount the runner sent and attaches it at target.
func receiveLayer(target string) error {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(layerFD, buf, oob, 0)
	if err != nil {
		return fmt.Errorf("receive the layer: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("receive the layer: no descriptor (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("receive the layer: no descriptor (%v)", err)
	}
	defer unix.Close(fds[0])
	if err := os.MkdirAll(target, 0o700); err != nil {
		return err
	}
	if err := unix.MoveMount(fds[0], "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the layer: %w", err)
	}
	return nil
}
