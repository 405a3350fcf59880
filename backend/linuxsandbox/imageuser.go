package linuxsandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxIDFile bounds how much of an image's /etc/passwd or /etc/group is
// read.
const maxIDFile = 1 << 20

// imageUser resolves an image config's user ("" or "root", a uid or a
// name, each optionally ":" a gid or a group name) to the uid and gid
// the workload runs as inside the sandbox's user namespace. Names are
// looked up in the image's own /etc/passwd and /etc/group, opened
// relative to its root directory rootfd with every link resolved
// inside it: the host's files are never read. A numeric uid without an
// entry runs with gid 0, as container runtimes do. Ids must fit the
// sandbox's range.
func imageUser(rootfd int, user string) (uid, gid int, err error) {
	if user == "" || user == "root" {
		return 0, 0, nil
	}
	name, group, hasGroup := strings.Cut(user, ":")
	uid, gid = -1, 0
	if n, err := strconv.Atoi(name); err == nil {
		uid = n
		if e, ok := lookupID(rootfd, "etc/passwd", 2, name); ok {
			gid, _ = strconv.Atoi(e[3])
		}
	} else if e, ok := lookupID(rootfd, "etc/passwd", 0, name); ok {
		uid, _ = strconv.Atoi(e[2])
		gid, _ = strconv.Atoi(e[3])
	} else {
		return 0, 0, fmt.Errorf("user %q is not in the image's /etc/passwd", name)
	}
	if hasGroup {
		if n, err := strconv.Atoi(group); err == nil {
			gid = n
		} else if e, ok := lookupID(rootfd, "etc/group", 0, group); ok {
			gid, _ = strconv.Atoi(e[2])
		} else {
			return 0, 0, fmt.Errorf("group %q is not in the image's /etc/group", group)
		}
	}
	if uid < 0 || uid >= idRange || gid < 0 || gid >= idRange {
		return 0, 0, fmt.Errorf("user %q (uid %d, gid %d) is outside the sandbox's ids 0-%d", user, uid, gid, idRange-1)
	}
	return uid, gid, nil
}

// lookupID returns the first entry of the colon-separated file rel
// (inside the image) whose field col is key; entries with fewer than
// four fields are skipped.
func lookupID(rootfd int, rel string, col int, key string) ([]string, bool) {
	data, err := readInRoot(rootfd, rel, maxIDFile)
	if err != nil {
		return nil, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 4 && f[col] == key {
			return f, true
		}
	}
	return nil, false
}

// readInRoot reads the regular file rel below rootfd, at most limit
// bytes, resolving links inside the root and never blocking on a FIFO.
func readInRoot(rootfd int, rel string, limit int64) ([]byte, error) {
	fd, err := unix.Openat2(rootfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
