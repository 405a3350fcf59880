package guestvm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// Initramfs writes a cpio archive in the "newc" format the kernel unpacks
// into its initial root: directories, regular files, symlinks and
// character devices, each owned by root.
type Initramfs struct {
	w    *bufio.Writer
	ino  int
	dirs map[string]bool
	err  error
}

// NewInitramfs starts an archive on w; Close writes its trailer.
func NewInitramfs(w io.Writer) *Initramfs {
	return &Initramfs{w: bufio.NewWriterSize(w, 1<<20), ino: 1, dirs: map[string]bool{"": true}}
}

// cpio mode bits.
const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
	modeChar    = 0o020000
)

// Dir adds a directory and any missing parents.
func (a *Initramfs) Dir(name string, perm os.FileMode) {
	name = clean(name)
	if a.dirs[name] {
		return
	}
	a.Dir(path.Dir(name), 0o755)
	a.dirs[name] = true
	a.entry(name, modeDir|uint32(perm.Perm()), 0, 0, nil, 0)
}

// Bytes adds a regular file holding data.
func (a *Initramfs) Bytes(name string, perm os.FileMode, data []byte) {
	name = clean(name)
	a.Dir(path.Dir(name), 0o755)
	a.entry(name, modeFile|uint32(perm.Perm()), 0, 0, strings.NewReader(string(data)), int64(len(data)))
}

// File adds a copy of the host file src, keeping its permission bits.
func (a *Initramfs) File(name, src string) {
	f, err := os.Open(src)
	if err != nil {
		a.fail(err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		a.fail(err)
		return
	}
	name = clean(name)
	a.Dir(path.Dir(name), 0o755)
	a.entry(name, modeFile|uint32(st.Mode().Perm()), 0, 0, f, st.Size())
}

// Symlink adds a symbolic link to target.
func (a *Initramfs) Symlink(name, target string) {
	name = clean(name)
	a.Dir(path.Dir(name), 0o755)
	a.entry(name, modeSymlink|0o777, 0, 0, strings.NewReader(target), int64(len(target)))
}

// CharDevice adds a character device node (/dev/console is 5, 1: the
// kernel opens it as the init's stdin, stdout and stderr).
func (a *Initramfs) CharDevice(name string, perm os.FileMode, major, minor uint32) {
	name = clean(name)
	a.Dir(path.Dir(name), 0o755)
	a.entry(name, modeChar|uint32(perm.Perm()), major, minor, nil, 0)
}

// Close writes the trailer and flushes; it returns the first error.
func (a *Initramfs) Close() error {
	a.entry("TRAILER!!!", 0, 0, 0, nil, 0)
	if a.err != nil {
		return a.err
	}
	return a.w.Flush()
}

func clean(name string) string { return strings.TrimPrefix(path.Clean("/"+name), "/") }

func (a *Initramfs) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// entry writes one header ("070701", 13 eight-digit hex fields), the
// NUL-terminated name and the data, each padded to four bytes.
func (a *Initramfs) entry(name string, mode, rdevMajor, rdevMinor uint32, data io.Reader, size int64) {
	if a.err != nil {
		return
	}
	if size > 0xffffffff {
		a.fail(fmt.Errorf("%s: %d bytes is over the newc format's 4 GiB", name, size))
		return
	}
	nlink := 1
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	ino := a.ino
	a.ino++
	if name == "TRAILER!!!" {
		ino, nlink = 0, 1
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	a.write([]byte(hdr + name + "\x00"))
	a.pad(len(hdr) + len(name) + 1)
	if data != nil {
		n, err := io.CopyN(a.w, data, size)
		if err != nil {
			a.fail(fmt.Errorf("%s: %w", name, err))
			return
		}
		a.pad(int(n))
	}
}

func (a *Initramfs) write(b []byte) {
	if _, err := a.w.Write(b); err != nil {
		a.fail(err)
	}
}

func (a *Initramfs) pad(n int) {
	if r := n % 4; r != 0 {
		a.write(make([]byte, 4-r))
	}
}
