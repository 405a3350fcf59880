package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// bindMount is one backend.Bind as the init sees it.
//
// A read-only bind (a caller's node_modules) is bound by path by the init
// itself, so it reaches only what the sandbox's host uid may reach, and
// through no symlink (bindNoSymlinks). A writable bind is a directory the
// runner keeps across runs (a build cache) while every run has a host uid
// range of its own: no single owner suits them all. As with overlay
// layers (layer.go), a root runner leaves its files owned on disk by
// layerOwner and hands each sandbox an idmapped, writable mount in which
// layerOwner is the sandbox's workload uid; what the workload writes
// lands on disk as layerOwner again, so the next run, in any range and
// concurrently, can read and replace it. No file is ever made writable
// by others, and no tree is chowned per run.
type bindMount struct {
	Source string `json:"source"`
	// Target is absolute inside the sandbox.
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// CopyOnWrite makes a read-only bind the lower layer of an overlay
	// at Target whose upper layer is on the sandbox's own tmpfs (cow.go).
	CopyOnWrite bool `json:"copy_on_write,omitempty"`
	// FD says the mount arrives on the layer socket (after the overlay
	// layer, in order) instead of by path.
	FD bool `json:"fd,omitempty"`
}

// initBinds turns the Spec's binds into the init's, giving writable ones
// to layerOwner when the runner is root (slot != nil). A root runner
// sends a copy-on-write bind's lower layer as an idmapped mount
// (sendCowLower); an unprivileged one's init binds it by path.
func initBinds(binds []backend.Bind, slot *idSlot) ([]bindMount, error) {
	var out []bindMount
	for _, b := range binds {
		if b.CopyOnWrite && !b.ReadOnly {
			return nil, job.Errorf(job.CodeBackendSetupFailed, "a copy-on-write bind must be read-only").With("path", b.Source)
		}
		m := bindMount{Source: b.Source, Target: b.Target, ReadOnly: b.ReadOnly, CopyOnWrite: b.CopyOnWrite,
			FD: (!b.ReadOnly || b.CopyOnWrite) && slot != nil}
		if !filepath.IsAbs(m.Target) {
			m.Target = filepath.Join(WorkspaceMount, m.Target)
		}
		switch {
		case m.CopyOnWrite && m.FD:
			// The runner opens it (through no symlink) and sends it;
			// nothing on disk changes owner.
		case m.FD:
			if err := giveBind(b.Source); err != nil {
				return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot give a writable bind to the sandbox id").With("path", b.Source)
			}
		default:
			if err := traversable(b.Source); err != nil {
				return nil, err
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// hasFDBinds reports whether any bind travels on the layer socket.
func hasFDBinds(binds []bindMount) bool {
	for _, b := range binds {
		if b.FD {
			return true
		}
	}
	return false
}

// giveBind chowns dir to layerOwner unless its root already is (files a
// sandbox writes through the idmapped mount are layerOwner's already).
func giveBind(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st.Uid == layerOwner && st.Gid == layerOwner {
		return nil
	}
	return chownTree(dir, layerOwner)
}

// sendBinds passes an idmapped, writable mount of every FD bind to the
// init over its layer socket, in order.
func sendBinds(sock *os.File, binds []bindMount, base int) error {
	for _, b := range binds {
		if !b.FD {
			continue
		}
		if b.CopyOnWrite {
			if err := sendCowLower(sock, b.Source, base); err != nil {
				return job.Wrap(job.CodeBackendUnavail, err, "linux_sandbox cannot make a copy-on-write mount here (workspace.readonly_mounts_mode copy_on_write)").
					With("path", b.Source).With("reason", err.Error())
			}
			continue
		}
		if err := sendIdmappedBind(sock, b.Source, base); err != nil {
			return job.Wrap(job.CodeBackendSetupFailed, err, "cannot give the sandbox its writable binds")
		}
	}
	return nil
}

func sendIdmappedBind(sock *os.File, dir string, base int) error {
	return sendIdmapped(sock, dir, base, 0)
}

// mountBinds runs in the init after the workspace and /tmp are mounted,
// so a bind inside /workspace lies over the snapshot (or an overlay's
// merged view) and one under /tmp is not hidden by it. Copy-on-write
// binds are overlays staged on cow's tmpfs (cow.go).
func mountBinds(root string, binds []bindMount, cow *cowScratch) error {
	for _, b := range binds {
		target := filepath.Join(root, b.Target)
		var err error
		if b.CopyOnWrite {
			err = cow.mount(b, target)
		} else if b.FD {
			// Parents first: receiveLayer makes its own mount point 0700.
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				err = receiveLayer(target)
			}
		} else {
			err = bindNoSymlinks(b.Source, target, b.ReadOnly)
		}
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.Target, err)
		}
	}
	return nil
}

// bindNoSymlinks binds src at target through no symlink in any of its
// components: the runner resolved src when it checked it, and a link
// swapped in since then is refused rather than followed.
func bindNoSymlinks(src, target string, ro bool) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, src, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer unix.Close(fd)
	return bind(fmt.Sprintf("/proc/self/fd/%d", fd), target, ro)
}
