package linuxsandbox

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// mountOverlay mounts the workspace overlay at target. The kernel shows an
// overlay's options in every /proc/<pid>/mountinfo as they were given, so
// the layers are named by descriptors (/proc/self/fd/N, resolved while
// mounting) instead of their host paths: the sandbox sees neither the
// store's path nor the job id there. (userxattr: overlay inside a user
// namespace keeps its metadata in user.* xattrs.)
func mountOverlay(target, lower, upper, work string) error {
	var names [3]string
	for i, dir := range []string{lower, upper, work} {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", dir, err)
		}
		defer unix.Close(fd)
		names[i] = "/proc/self/fd/" + strconv.Itoa(fd)
	}
	opts := "lowerdir=" + names[0] + ",upperdir=" + names[1] + ",workdir=" + names[2] + ",userxattr"
	return unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts)
}
