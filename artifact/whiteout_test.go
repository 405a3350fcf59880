package artifact

import "golang.org/x/sys/unix"

func mknodWhiteout(path string) error { return unix.Mknod(path, unix.S_IFCHR|0o600, 0) }
