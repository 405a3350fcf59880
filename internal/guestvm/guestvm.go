// Package guestvm boots a throwaway Linux guest under QEMU to run one
// command on a kernel and cgroup layout other than the host's: it packs
// an initramfs (cpio newc) around a static Go init (guestinit), the
// kernel modules that init loads (9p over virtio) and the files to run,
// shares host directories read-only over 9p, and reads the command's
// exit status back from the serial console, where the init prints
// ExitMarker before it powers the machine off. It is the start of a
// microVM backend; today the linux_sandbox tests use it to run under
// cgroup v2 on hosts that mount cgroup v1.
package guestvm

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// RunMarker and ExitMarker frame each command's output on the console:
// the init prints "RunMarker name" before it and "ExitMarker code" after
// it (SetupFailed when the guest could not run it).
const (
	RunMarker  = "AGENT-RUNNER-GUEST-RUN"
	ExitMarker = "AGENT-RUNNER-GUEST-EXIT"
)

// SetupFailed is the exit code reported when the guest could not set
// itself up or start a command.
const SetupFailed = 125

// ConfigPath is where the init finds its Config in the initramfs.
const ConfigPath = "/guest.json"

// Config tells the guest init what to set up and run.
type Config struct {
	// Modules are kernel module files in the initramfs, loaded in order.
	Modules []string `json:"modules,omitempty"`
	// Shares are 9p exports to mount.
	Shares []Mount `json:"shares,omitempty"`
	// Binds graft parts of a share onto the guest root: a directory is
	// bind-mounted, a symlink (usr-merge's /bin -> usr/bin) copied.
	Binds []Bind `json:"binds,omitempty"`
	// Commands run one after the other.
	Commands []Command `json:"commands"`
}

// Command is one program the init runs.
type Command struct {
	// Name labels its output (Result.Runs).
	Name string `json:"name"`
	// Argv, Env and Dir are the program, its whole environment and its
	// working directory.
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Cgroup, when set, is a cgroup below the root that the command is
	// born in, with cpu, memory and pids enabled for it the way a
	// systemd unit with Delegate=yes gets them; "" runs it in the root.
	Cgroup string `json:"cgroup,omitempty"`
	// User runs it as this uid and gid (0: root). Its Cgroup is then
	// delegated to it the way systemd delegates to a user: the directory,
	// cgroup.procs, cgroup.subtree_control and cgroup.threads are chowned.
	User int `json:"user,omitempty"`
}

// Mount is a 9p export the init mounts at Path.
type Mount struct {
	Tag      string `json:"tag"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Bind makes To in the guest root show From (a path under a share).
type Bind struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Image is what goes into an initramfs.
type Image struct {
	// Init is the static guest init binary on the host (guestinit).
	Init string
	// Kernel and Modules: the named modules and their dependencies are
	// packed and listed in Config.Modules.
	Kernel  Kernel
	Modules []string
	// Files maps guest paths to host files packed with them.
	Files map[string]string
	// Config is written to ConfigPath.
	Config Config
}

// ShareModules are the modules a guest needs to mount 9p over virtio-pci.
var ShareModules = []string{"virtio_pci", "9pnet_virtio", "9p"}

// WriteInitramfs packs the image into the file at dst.
func (im Image) WriteInitramfs(dst string) error {
	mods, err := im.Kernel.ModulePaths(im.Modules...)
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	a := NewInitramfs(f)
	a.File("init", im.Init)
	a.CharDevice("dev/console", 0o600, 5, 1)
	for _, d := range []string{"proc", "sys", "tmp", "run", "root"} {
		a.Dir(d, 0o755)
	}
	cfg := im.Config
	cfg.Modules = nil
	for _, m := range mods {
		guest := path.Join("/.modules", m) // not /lib: Binds may graft /lib
		a.File(guest, filepath.Join(im.Kernel.Modules, m))
		cfg.Modules = append(cfg.Modules, guest)
	}
	for guest, host := range im.Files {
		a.File(guest, host)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	a.Bytes(ConfigPath, 0o644, js)
	if err := a.Close(); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return f.Close()
}
