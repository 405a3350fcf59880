package guestvm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Init is the guest's pid 1 (guestinit calls it): it sets the guest up
// from ConfigPath, runs each command between RunMarker and ExitMarker
// lines on the console, and powers the machine off. It never returns.
func Init() {
	cfg, err := setUp()
	if err != nil {
		fmt.Printf("guestinit: %v\n\n%s %d\n", err, ExitMarker, SetupFailed)
	}
	for _, c := range cfg.Commands {
		fmt.Printf("\n%s %s\n", RunMarker, c.Name)
		code, err := run(c)
		if err != nil {
			fmt.Printf("guestinit: %s: %v\n", c.Name, err)
			code = SetupFailed
		}
		fmt.Printf("\n%s %d\n", ExitMarker, code)
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART) // -no-reboot makes QEMU exit
	}
	select {} // pid 1 must not exit: the kernel would panic
}

func setUp() (Config, error) {
	if err := leaveRootfs(); err != nil {
		return Config{}, err
	}
	b, err := os.ReadFile(ConfigPath)
	if err != nil {
		return Config{}, err
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return Config{}, fmt.Errorf("%s: %w", ConfigPath, err)
	}
	fail := func(err error) (Config, error) { return Config{}, err }
	if err := mountBasics(); err != nil {
		return fail(err)
	}
	for _, m := range cfg.Modules {
		if err := loadModule(m); err != nil {
			return fail(err)
		}
	}
	for _, s := range cfg.Shares {
		if err := mountShare(s); err != nil {
			return fail(err)
		}
	}
	for _, b := range cfg.Binds {
		if err := graft(b); err != nil {
			return fail(err)
		}
	}
	return cfg, nil
}

// leaveRootfs moves the initramfs contents onto a tmpfs and makes that
// the root (what switch_root does): pivot_root, which the sandboxes this
// guest runs need, refuses to work while the root is the initial rootfs.
func leaveRootfs() error {
	const next = "/.root"
	if err := os.Mkdir(next, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", next, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount the new root: %w", err)
	}
	err := filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "/" {
			return nil
		}
		if p == next {
			return filepath.SkipDir
		}
		dst := filepath.Join(next, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(dst, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case d.Type().IsRegular():
			err := copyFile(p, dst, info.Mode().Perm())
			os.Remove(p) // free the rootfs copy
			return err
		}
		return nil // devices: devtmpfs provides them
	})
	if err != nil {
		return fmt.Errorf("copy the initramfs: %w", err)
	}
	if err := os.Chdir(next); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the new root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return os.Chdir("/")
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// mountBasics mounts proc, sysfs, devtmpfs (with devpts and /dev/shm),
// only cgroup2 at /sys/fs/cgroup, and tmpfs /tmp and /run.
func mountBasics() error {
	for _, m := range []struct{ src, dst, fstype, data string }{
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", "nsdelegate"},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777"},
		{"tmpfs", "/run", "tmpfs", "mode=0755"},
		{"tmpfs", "/dev/shm", "tmpfs", "mode=1777"},
		{"devpts", "/dev/pts", "devpts", "newinstance,ptmxmode=0666,mode=0620"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, unix.MS_NOSUID, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err)
		}
	}
	if _, err := os.Lstat("/dev/ptmx"); errors.Is(err, fs.ErrNotExist) {
		return os.Symlink("pts/ptmx", "/dev/ptmx")
	}
	return nil
}

// loadModule loads a module file; a compressed one (.ko.xz, .ko.zst) is
// left to the kernel to decompress.
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	if !strings.HasSuffix(path, ".ko") {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	if err := unix.FinitModule(int(f.Fd()), "", flags); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load %s: %w", filepath.Base(path), err)
	}
	return nil
}

// mountShare mounts a 9p export, waiting briefly for its virtio device.
func mountShare(s Mount) error {
	if err := os.MkdirAll(s.Path, 0o755); err != nil {
		return err
	}
	var flags uintptr
	if s.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	opts := "trans=virtio,version=9p2000.L,msize=524288,cache=loose"
	var err error
	for range 50 {
		if err = unix.Mount(s.Tag, s.Path, "9p", flags, opts); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("mount 9p %s on %s: %w", s.Tag, s.Path, err)
}

// graft shows b.From at b.To: a symlink is copied, a directory or file
// bind-mounted read-only.
func graft(b Bind) error {
	st, err := os.Lstat(b.From)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(b.From)
		if err != nil {
			return err
		}
		return os.Symlink(target, b.To)
	}
	if st.IsDir() {
		err = os.MkdirAll(b.To, 0o755)
	} else {
		err = os.WriteFile(b.To, nil, 0o644)
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(b.From, b.To, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", b.From, b.To, err)
	}
	return unix.Mount("", b.To, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
}

// run starts the command, in its cgroup and as its user when set, and
// returns its exit code (128+n for a death by signal n).
func run(c Command) (int, error) {
	if len(c.Argv) == 0 {
		return 0, fmt.Errorf("no command")
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if c.User != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(c.User), Gid: uint32(c.User)}
	}
	if c.Cgroup != "" {
		fd, err := delegatedCgroup(c.Cgroup, c.User)
		if err != nil {
			return 0, err
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

// delegatedCgroup creates /sys/fs/cgroup/<name> with cpu, memory and pids
// enabled in every cgroup above it, hands it to uid when not root, and
// returns a descriptor of it for CLONE_INTO_CGROUP: the command is born
// there, as a systemd service's main process is born in its unit's cgroup.
func delegatedCgroup(name string, uid int) (int, error) {
	dir := "/sys/fs/cgroup"
	for _, part := range strings.Split(strings.Trim(name, "/"), "/") {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0o644); err != nil {
			return 0, fmt.Errorf("enable controllers in %s: %w", dir, err)
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return 0, err
		}
	}
	if uid != 0 {
		for _, p := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
			if err := os.Chown(filepath.Join(dir, p), uid, uid); err != nil {
				return 0, fmt.Errorf("delegate %s: %w", dir, err)
			}
		}
	}
	return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}
