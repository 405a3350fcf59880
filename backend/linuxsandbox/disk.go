package linuxsandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// A job's disk limit (backend.Limits.DiskBytes and DiskInodes) is a tmpfs
// of that size and inode count that holds its writable workspace: the
// snapshot copied into it, or an overlay's upper and work dirs. A write
// past either cap fails inside the job with ENOSPC.
//
// The runner makes the tmpfs with fsopen/fsmount as a detached mount
// that belongs to no mount namespace, copies the snapshot in through
// /proc/self/fd/N, and hands the init that mount (in place of a clone
// of the on-disk snapshot, hostmounts.go), which attaches it at
// /workspace. The runner keeps its descriptor: after the sandbox is gone
// the job's files are still readable there (Outcome.Layers, for
// artifacts), and closing it (Outcome.Release) frees them. Nothing is
// mounted on the host, so a runner that dies leaks no mount: the kernel
// frees the tmpfs with the runner's descriptors. The on-disk snapshot
// keeps the workspace as it was before the run.
//
// tmpfs pages are memory: what the job writes is charged to its memory
// cgroup (the writer's), so a job fills disk_mb or memory_mb, whichever
// comes first (ENOSPC, or an OOM kill); the copied snapshot is charged
// to the runner. Making a tmpfs outside a user namespace needs a root
// runner; an unprivileged one cannot enforce a disk limit (limits.go).

// workspaceDisk is one job's size-limited workspace filesystem.
type workspaceDisk struct {
	fd int
	// root is the runner's path to the tmpfs's root directory.
	root string
}

// errDiskUnprivileged is why an unprivileged runner has no disk limit.
var errDiskUnprivileged = errors.New("a disk limit is a tmpfs the runner mounts, which needs a root runner")

// diskPrivileged reports whether this runner may make a tmpfs outside a
// user namespace (tests make it false).
var diskPrivileged = func() bool { return os.Getuid() == 0 }

// newDisk makes a detached tmpfs of lim's size and inode count.
func newDisk(lim backend.Limits) (*workspaceDisk, error) {
	if !diskPrivileged() {
		return nil, errDiskUnprivileged
	}
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	opts := [][2]string{{"size", strconv.FormatInt(lim.DiskBytes, 10)}, {"mode", "0755"}, {"huge", "never"}}
	if lim.DiskInodes > 0 {
		opts = append(opts, [2]string{"nr_inodes", strconv.FormatInt(lim.DiskInodes, 10)})
	}
	for _, o := range opts {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return nil, fmt.Errorf("tmpfs %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("create the tmpfs: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("fsmount the tmpfs: %w", err)
	}
	// "/." so that O_NOFOLLOW opens of the root (safecopy.OpenRoot) do
	// not stop at the magic link.
	return &workspaceDisk{fd: fd, root: "/proc/self/fd/" + strconv.Itoa(fd) + "/."}, nil
}

// close frees the tmpfs (once the sandbox's mount namespace is gone).
func (d *workspaceDisk) close() { unix.Close(d.fd) }

// path is rel inside the tmpfs.
func (d *workspaceDisk) path(rel string) string { return filepath.Join(d.root, rel) }

// fill puts the job's workspace on the disk, owned by id, and returns
// the workspace as the sandbox gets it and the layers its files are read
// from afterwards: a copy snapshot copied in whole, or empty upper and
// work dirs for an overlay (whose shared lower layer stays where it is
// and is given to layer as giveWorkspace does).
func (d *workspaceDisk) fill(ws backend.Workspace, id, layer int) (backend.Workspace, []string, error) {
	if !ws.Overlay() {
		if err := copyTree(ws.Dir, d.root, id); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return ws, nil, job.Wrap(job.CodeSnapshotFailed, err, "the workspace snapshot does not fit the job's disk limit (limits.disk_mb, limits.disk_inodes)")
			}
			return ws, nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot copy the snapshot onto the job's disk")
		}
		return ws, []string{d.root}, nil
	}
	in := backend.Workspace{Lower: ws.Lower, Upper: d.path(filepath.Base(ws.Upper)), Work: d.path(filepath.Base(ws.Work))}
	for _, dir := range []string{in.Upper, in.Work} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return ws, nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot make the overlay dirs on the job's disk")
		}
	}
	if err := giveWorkspace(in, id, layer); err != nil {
		return ws, nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot hand the snapshot to the sandbox uid")
	}
	return ws, []string{in.Upper, ws.Lower}, nil
}

// copyTree copies the snapshot src (directories, regular files and
// symlinks, as snapshot.Copy makes them) into the existing directory dst,
// every entry owned by id.
func copyTree(src, dst string, id int) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && rel == ".":
			err = os.Chmod(dst, info.Mode().Perm())
		case d.IsDir():
			err = os.Mkdir(target, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(p); err == nil {
				err = os.Symlink(link, target)
			}
		case d.Type().IsRegular():
			return copyFile(p, target, info.Mode().Perm(), id)
		default:
			return fmt.Errorf("%s: not a directory, file or symlink", rel)
		}
		if err != nil {
			return err
		}
		if rel == "." {
			return os.Chown(dst, id, id) // through the magic link
		}
		return os.Lchown(target, id, id)
	})
}

// copyFile copies the regular file src to a new file dst owned by id.
func copyFile(src, dst string, perm fs.FileMode, id int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := out.Chown(id, id); err != nil {
		out.Close()
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
