package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// buildRoot assembles the sandbox filesystem on a tmpfs at cfg.Root and
// pivot_roots into it.
func buildRoot(cfg initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// A root runner sends the job's bind sources as mounts (hostmounts.go).
	var r received
	if cfg.BindFDs {
		var err error
		if r, err = receiveHostMounts(cfg.hostMounts()); err != nil {
			return err
		}
		defer r.close()
	}
	root := cfg.Root
	if cfg.Image {
		var err error
		if root, err = mountImageRoot(cfg, r); err != nil {
			return err
		}
	} else if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	for _, dir := range cfg.Toolchain {
		if err := bindToolchain(root, dir); err != nil {
			return err
		}
	}
	if err := mountWorkspace(root, cfg, r); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if err := mountAt("tmpfs", filepath.Join(root, "tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size="+strconv.FormatInt(tmpBytes(cfg), 10)); err != nil {
		return fmt.Errorf("/tmp: %w", err)
	}
	// Extra binds go after /tmp, so a read or write root under /tmp is
	// not hidden by the sandbox's own tmpfs.
	for _, d := range cfg.ReadOnly {
		if err := r.bind(d, filepath.Join(root, d), true); err != nil {
			return fmt.Errorf("read-only %s: %w", d, err)
		}
	}
	for _, d := range cfg.Writable {
		if err := r.bind(d, filepath.Join(root, d), false); err != nil {
			return fmt.Errorf("writable %s: %w", d, err)
		}
	}
	cow := newCowScratch(root, cfg)
	if err := mountBinds(root, cfg.Binds, cow); err != nil {
		return err
	}
	if err := cow.detach(); err != nil {
		return err
	}
	if cfg.EgressSocket != "" {
		if err := r.bindEgress(root, cfg); err != nil {
			return fmt.Errorf("egress bridge: %w", err)
		}
	}
	// Masks go last, so that no bind made after them (a read-only
	// directory under /etc) uncovers a secret.
	for _, f := range cfg.Masked {
		if err := mask(root, f); err != nil {
			return err
		}
	}
	if err := mountProc(root); err != nil {
		return err
	}
	if err := buildDev(root, cfg.TTY); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	return pivot(root, !cfg.Image)
}

// tmpBytes is the size of the sandbox's /tmp, and of the tmpfs holding
// its copy-on-write layers (cow.go): the job's limits.tmp_mb, 64 MiB
// when the Spec has none.
func tmpBytes(cfg initConfig) int64 {
	if cfg.TmpBytes > 0 {
		return cfg.TmpBytes
	}
	return 64 << 20
}

func mountAt(src, target, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	return unix.Mount(src, target, fstype, flags, data)
}

// bindToolchain binds a host dir read-only, or recreates it as a symlink
// when the host has it as one (usr-merge: /bin -> usr/bin).
func bindToolchain(root, dir string) error {
	fi, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(dir)
		if err != nil {
			return err
		}
		return os.Symlink(target, filepath.Join(root, dir))
	}
	return bind(dir, filepath.Join(root, dir), true)
}

// bind bind-mounts src on target, read-only if ro. The read-only remount
// keeps the source's locked flags (nosuid, nodev, noexec), which a user
// namespace may not clear; nosuid is always added.
func bind(src, target string, ro bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		err = touch(target)
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID) | lockedFlags(st.Flags)
	if ro {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", src, err)
	}
	return nil
}

func lockedFlags(f int64) uintptr {
	var out uintptr
	for st, ms := range map[int64]uintptr{unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC, unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME} {
		if f&st != 0 {
			out |= ms
		}
	}
	return out
}

func touch(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// buildDev makes a minimal /dev: null, zero, full, random, urandom, tty
// bound from the host, a private devpts, /dev/shm and the fd symlinks.
// With console, the terminal on the init's stdin (a pty the runner
// allocated) is bound at /dev/console, so ttyname() finds it.
func buildDev(root string, console bool) error {
	dev := filepath.Join(root, "dev")
	if err := mountAt("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		target := filepath.Join(dev, name)
		if err := touch(target); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+name, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if console {
		target := filepath.Join(dev, "console")
		if err := touch(target); err != nil {
			return err
		}
		// Bind by path: the descriptor's mount is the host namespace's.
		src, err := os.Readlink("/proc/self/fd/0")
		if err != nil {
			return fmt.Errorf("console: %w", err)
		}
		if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("console %s: %w", src, err)
		}
	}
	if err := mountAt("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := mountAt("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
		return err
	}
	for link, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, link)); err != nil {
			return err
		}
	}
	return nil
}

// pivot makes root the new / and detaches the host's; with readOnly the
// root itself becomes read-only (the host view's tmpfs; an image's root
// stays the sandbox's to write).
func pivot(root string, readOnly bool) error {
	old := filepath.Join(root, ".oldroot")
	if err := os.MkdirAll(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	// The root tmpfs itself becomes read-only: only /workspace, /tmp,
	// /dev/shm and the writable binds accept writes.
	return unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// mountWorkspace puts the job's snapshot at /workspace: a bind of the copy,
// or an overlay of the cached lower layer and the job's upper layer
// (userxattr: overlay inside a user namespace keeps its metadata in user.*
// xattrs).
func mountWorkspace(root string, cfg initConfig, r received) error {
	target := filepath.Join(root, WorkspaceMount)
	if cfg.Lower == "" {
		return r.bind(cfg.Workspace, target, false)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	lower := cfg.Lower
	if cfg.LayerFD {
		lower = filepath.Join(root, ".layer")
		if err := receiveLayer(lower); err != nil {
			return err
		}
	}
	upper, work := cfg.Upper, cfg.Work
	if dir := filepath.Dir(upper); r.has(dir) {
		// Their parent arrived as a mount: attach it privately, take
		// the overlay's layers from it, then let it go.
		at := filepath.Join(root, ".upper")
		if err := r.bind(dir, at, false); err != nil {
			return err
		}
		upper, work = filepath.Join(at, filepath.Base(upper)), filepath.Join(at, filepath.Base(work))
		defer func() {
			unix.Unmount(at, unix.MNT_DETACH)
			os.Remove(at)
		}()
	}
	if err := mountOverlay(target, lower, upper, work); err != nil {
		return err
	}
	if cfg.LayerFD {
		// The overlay holds its own reference to the layer.
		if err := unix.Unmount(lower, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detach the layer: %w", err)
		}
		return os.Remove(lower)
	}
	return nil
}

// bindEgress binds the gateway socket and CA bundle: the mounts the
// runner sent, else by path (see egress.go).
func (r received) bindEgress(root string, cfg initConfig) error {
	if !r.has(cfg.EgressSocket) {
		return bindEgress(root, cfg)
	}
	if err := os.MkdirAll(filepath.Join(root, egressDir), 0o755); err != nil {
		return err
	}
	if err := r.bind(cfg.EgressSocket, filepath.Join(root, egressSocket), true); err != nil {
		return err
	}
	if cfg.EgressCA != "" {
		return r.bind(cfg.EgressCA, filepath.Join(root, egressCA), true)
	}
	return nil
}
