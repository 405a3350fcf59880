package backend

import (
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultImagePath is the PATH of an image whose config names none.
var DefaultImagePath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// ImageView is the view of a sandbox whose root is img: every path lies
// inside the image's root file system and is resolved there as the
// sandbox resolves it (View.Root), never on the host; Path is the
// image's PATH (its config's env), else DefaultImagePath.
func ImageView(img Image) View {
	path := DefaultImagePath
	if p, ok := EnvValue(img.Env, "PATH"); ok && p != "" {
		path = nil
		for _, d := range filepath.SplitList(p) {
			if filepath.IsAbs(d) {
				path = append(path, filepath.Clean(d))
			}
		}
	}
	return View{Root: img.RootFS, Roots: []string{"/"}, Path: path}
}

// EnvValue is the value of key in env ("KEY=value"), the last one set.
func EnvValue(env []string, key string) (string, bool) {
	val, found := "", false
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, key+"="); ok {
			val, found = v, true
		}
	}
	return val, found
}

// MergeEnv is env over base: every key of env, and the keys of base
// that env does not set (an image's defaults under a job's own).
func MergeEnv(base, env []string) []string {
	set := map[string]bool{}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		set[k] = true
	}
	var out []string
	for _, e := range base {
		k, _, _ := strings.Cut(e, "=")
		if !set[k] {
			out = append(out, e)
			set[k] = true
		}
	}
	return append(out, env...)
}

// statIn stats p (absolute) inside root as a process chrooted there
// would find it: symbolic links are followed, but resolved within root
// (RESOLVE_IN_ROOT), so nothing outside the image is ever reached.
func statIn(root, p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat2(unix.AT_FDCWD, root, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	f, err := unix.Openat2(fd, strings.TrimPrefix(p, "/"), &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return st, err
	}
	defer unix.Close(f)
	err = unix.Fstat(f, &st)
	return st, err
}
