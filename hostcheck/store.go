package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lowSpace is the free space under which the store check warns.
const lowSpace = 1 << 30

// storeChecks reports the run store: whether it exists or can be created,
// whether the sandbox can reach it, and the free space on its filesystem.
func storeChecks(store string) []Check {
	abs := absPath(store)
	checks := []Check{storeDirCheck(abs), sandboxReach(os.TempDir(), os.Getuid() == 0), freeSpace(abs, lowSpace)}
	for i := range checks {
		checks[i].Section = SectionStore
	}
	return checks
}

func storeDirCheck(abs string) Check {
	c := Check{Name: "store_dir"}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		c.Status, c.Found = StatusFail, abs+" exists and is not a directory"
		c.Fix = "choose another --store-dir"
	case err == nil:
		c.Found = fmt.Sprintf("%s exists, mode %s, owner uid %d", abs, fi.Mode().Perm(), owner(fi))
		if aerr := unix.Access(abs, unix.W_OK|unix.X_OK); aerr != nil {
			c.Status, c.Found = StatusFail, c.Found+fmt.Sprintf(": not writable by uid %d (%v)", os.Getuid(), aerr)
			c.Fix = fmt.Sprintf("chown %d %s, or choose another --store-dir", os.Getuid(), abs)
		} else {
			c.Status = StatusOK
		}
	case errors.Is(err, fs.ErrNotExist):
		parent := existingAncestor(abs)
		if aerr := unix.Access(parent, unix.W_OK|unix.X_OK); aerr != nil {
			c.Status = StatusFail
			c.Found = fmt.Sprintf("%s does not exist and cannot be created: %s is not writable by uid %d (%v)", abs, parent, os.Getuid(), aerr)
			c.Fix = fmt.Sprintf("mkdir -p %s && chown %d %s, or choose another --store-dir", abs, os.Getuid(), abs)
		} else {
			c.Status, c.Found = StatusOK, abs+" does not exist yet; it will be created under "+parent
		}
	default:
		c.Status, c.Found = StatusFail, fmt.Sprintf("%s cannot be examined: %v", abs, err)
		c.Fix = "choose another --store-dir"
	}
	return c
}

// sandboxReach is what linux_sandbox needs of the store now: nothing of
// its ancestors. A root runner hands every directory to the sandbox as a
// detached mount (the sandbox's own uid never walks the path), and an
// unprivileged runner's sandbox has the runner's own uid. Only the empty
// mount point of the sandbox root, made in the temporary directory
// (tmp), must be reachable by a root runner's sandbox uid, so that is
// what this checks. Keep the requirement in this one function.
func sandboxReach(tmp string, root bool) Check {
	c := Check{Name: "sandbox_tmpdir"}
	if !root {
		c.Status, c.Found = StatusOK, "an unprivileged runner's sandbox has the runner's own uid, which reaches "+tmp
		return c
	}
	var paths, described []string // top-down
	for p := tmp; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			paths = append([]string{p}, paths...)
			described = append([]string{fmt.Sprintf("%s (%s)", p, fi.Mode().Perm())}, described...)
		}
		if p == "/" {
			break
		}
	}
	if len(paths) == 0 {
		c.Status, c.Found = StatusOK, "others can search "+tmp+", where each sandbox root's mount point is made; the store's directories reach the sandbox as mounts, so its parents may be private"
		return c
	}
	c.Status = StatusFail
	c.Found = "each sandbox root's mount point is made in " + tmp + ", which the sandbox uid must reach; others cannot search " + strings.Join(described, ", ")
	c.Fix = "chmod o+x " + strings.Join(paths, " ") + ", or set TMPDIR to a directory others can search (e.g. /tmp)"
	return c
}

// freeSpace reports the space available to the runner on the store's
// filesystem, warning below low bytes.
func freeSpace(abs string, low uint64) Check {
	c := Check{Name: "store_free_space"}
	dir := existingAncestor(abs)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		c.Status, c.Found = StatusWarn, fmt.Sprintf("cannot statfs %s: %v", dir, err)
		c.Fix = "check the store's filesystem"
		return c
	}
	free := st.Bavail * uint64(st.Bsize)
	total := st.Blocks * uint64(st.Bsize)
	c.Found = fmt.Sprintf("%s free of %s on the filesystem of %s", gib(free), gib(total), dir)
	if free < low {
		c.Status = StatusWarn
		c.Fix = "free space on that filesystem, or move the store (--store-dir): every job keeps a workspace snapshot and its artifacts there"
		return c
	}
	c.Status = StatusOK
	return c
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// existingAncestor is abs or its nearest existing ancestor.
func existingAncestor(abs string) string {
	p := abs
	for {
		if _, err := os.Stat(p); err == nil || p == "/" {
			return p
		}
		p = filepath.Dir(p)
	}
}

func owner(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
