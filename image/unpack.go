package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
)

// unpacker applies layers, in order, to one rootfs directory it holds
// open. Every entry is created from a directory descriptor beneath that
// root: a parent directory is resolved with openat2's RESOLVE_IN_ROOT,
// so a symlink on the way (lib -> usr/lib, or a hostile evil -> /etc)
// resolves as it would inside the sandbox, never outside the root; where
// openat2 is missing, no symlink is followed at all and such an entry is
// image.unsafe_entry. The last component is never followed: what is there
// is removed and the entry created in its place.
type unpacker struct {
	root   int
	caps   Config
	asRoot bool
	// bytes and entries count what the layers declared so far,
	// streamed the uncompressed bytes read (streamCap).
	bytes, entries, streamed int64
	// seen are the paths the current layer created (whiteouts apply
	// only to the layers below).
	seen map[string]bool
	// restore are directories whose mode lacked owner rwx; without root
	// they stay 0700 until finish gives them their mode.
	restore map[string]uint32
}

func newUnpacker(root int, caps Config) *unpacker {
	return &unpacker{root: root, caps: caps, asRoot: os.Geteuid() == 0, restore: map[string]uint32{}}
}

// whiteout prefixes (OCI image spec, layer changesets).
const (
	whPrefix = ".wh."
	whOpaque = ".wh..wh..opq"
)

func unsafeEntry(name, why string) error {
	return job.Errorf(job.CodeImageUnsafeEntry, "layer entry %q: %s", name, why).With("entry", name)
}

func invalid(format string, args ...any) *job.Error {
	return job.Errorf(job.CodeImageInvalid, format, args...)
}

// entryName cleans a tar entry's name: "./" and trailing "/" dropped.
// An absolute name, a ".." component or an odd byte is unsafe.
func entryName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", unsafeEntry(n, "absolute name")
	}
	if len(n) > 4096 || strings.ContainsAny(n, "\x00") {
		return "", unsafeEntry(n, "name too long or with a NUL byte")
	}
	var parts []string
	for _, p := range strings.Split(n, "/") {
		switch p {
		case "", ".":
		case "..":
			return "", unsafeEntry(n, `name with ".."`)
		default:
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return strings.Join(parts, "/"), nil
}

// layer applies one uncompressed layer tar.
func (u *unpacker) layer(r io.Reader) error {
	u.seen = map[string]bool{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return readErr(err, "a layer is not a valid tar")
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	dir, base := path.Split(name)
	dir = path.Clean(dir)
	if base == whOpaque {
		return u.opaque(dir)
	}
	if w, ok := strings.CutPrefix(base, whPrefix); ok {
		if w == "" || w == "." || w == ".." {
			return unsafeEntry(hdr.Name, "whiteout of no name")
		}
		return u.whiteout(path.Join(dir, w))
	}
	u.entries++
	if u.entries > u.caps.MaxEntries {
		return job.Errorf(job.CodeImageTooLarge, "the image has more than %d entries", u.caps.MaxEntries).With("max_entries", u.caps.MaxEntries)
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		return unsafeEntry(hdr.Name, "device node")
	case tar.TypeReg, tar.TypeGNUSparse:
		if hdr.Size < 0 || hdr.Size > u.caps.MaxBytes-u.bytes {
			return job.Errorf(job.CodeImageTooLarge, "layer entry %q declares %d bytes: the image would be over %d bytes unpacked", hdr.Name, hdr.Size, u.caps.MaxBytes).With("entry", hdr.Name).With("max_bytes", u.caps.MaxBytes)
		}
		u.bytes += hdr.Size
	case tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default:
		return invalid("layer entry %q has tar type %q, which the store does not unpack", hdr.Name, hdr.Typeflag).With("entry", hdr.Name)
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return unsafeEntry(hdr.Name, "the root is not a directory")
		}
		return u.chmodDir(u.root, ".", hdr)
	}
	u.seen[name] = true
	pfd, err := u.mkdirAll(dir, hdr.Name)
	if err != nil {
		return err
	}
	defer u.closeDir(pfd)
	var st unix.Stat_t
	exists := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	if exists && !(hdr.Typeflag == tar.TypeDir && st.Mode&unix.S_IFMT == unix.S_IFDIR) {
		if err := removeAt(pfd, base); err != nil {
			return ioErr(err, hdr.Name)
		}
		exists = false
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if !exists {
			if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
				return ioErr(err, hdr.Name)
			}
		}
		fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return ioErr(err, hdr.Name)
		}
		defer unix.Close(fd)
		if err := u.chown(pfd, base, hdr); err != nil {
			return err
		}
		return u.chmodDir(fd, name, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return ioErr(err, hdr.Name)
		}
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		if _, err := io.CopyN(f, r, hdr.Size); err != nil {
			return readErr(err, "a layer's file is shorter than its header says")
		}
		if err := u.chown(pfd, base, hdr); err != nil {
			return err
		}
		if err := unix.Fchmod(fd, uint32(hdr.Mode)&0o777); err != nil {
			return ioErr(err, hdr.Name)
		}
	case tar.TypeSymlink:
		if hdr.Linkname == "" || len(hdr.Linkname) > 4096 {
			return unsafeEntry(hdr.Name, "symlink with an empty or overlong target")
		}
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return ioErr(err, hdr.Name)
		}
		if err := u.chown(pfd, base, hdr); err != nil {
			return err
		}
	case tar.TypeLink:
		if err := u.hardlink(pfd, base, hdr); err != nil {
			return err
		}
		return nil
	case tar.TypeFifo:
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return ioErr(err, hdr.Name)
		}
		if err := u.chown(pfd, base, hdr); err != nil {
			return err
		}
		if err := unix.Fchmodat(pfd, base, uint32(hdr.Mode)&0o777, 0); err != nil {
			return ioErr(err, hdr.Name)
		}
	}
	mt := unix.NsecToTimespec(hdr.ModTime.UnixNano())
	unix.UtimesNanoAt(pfd, base, []unix.Timespec{mt, mt}, unix.AT_SYMLINK_NOFOLLOW)
	return nil
}

// hardlink links base in pfd to the entry hdr.Linkname names, which must
// be a non-directory already unpacked inside the root.
func (u *unpacker) hardlink(pfd int, base string, hdr *tar.Header) error {
	target, err := entryName(hdr.Linkname)
	if err != nil {
		return unsafeEntry(hdr.Name, fmt.Sprintf("hard link to %q, outside the image", hdr.Linkname))
	}
	if target == "." {
		return unsafeEntry(hdr.Name, "hard link to the root")
	}
	tdir, tbase := path.Split(target)
	tfd, err := u.openIn(path.Clean(tdir), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return unsafeEntry(hdr.Name, fmt.Sprintf("hard link to %q, which is not in the image", hdr.Linkname))
	}
	defer u.closeDir(tfd)
	var st unix.Stat_t
	if err := unix.Fstatat(tfd, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unsafeEntry(hdr.Name, fmt.Sprintf("hard link to %q, which is not a file in the image", hdr.Linkname))
	}
	if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
		return ioErr(err, hdr.Name)
	}
	return nil
}

// chown gives an entry the tar's numeric owner when the store runs as
// root (ids above 65535 become 65534, nobody); otherwise every entry is
// the store's user's.
func (u *unpacker) chown(pfd int, base string, hdr *tar.Header) error {
	if !u.asRoot {
		return nil
	}
	uid, gid := hdr.Uid, hdr.Gid
	if uid < 0 || uid > 65535 {
		uid = 65534
	}
	if gid < 0 || gid > 65535 {
		gid = 65534
	}
	if err := unix.Fchownat(pfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ioErr(err, hdr.Name)
	}
	return nil
}

// chmodDir gives the open directory fd its mode (setuid and setgid
// dropped, sticky kept). Without root a mode lacking owner rwx waits for
// finish, so the layers can still write below.
func (u *unpacker) chmodDir(fd int, name string, hdr *tar.Header) error {
	mode := uint32(hdr.Mode) & 0o1777
	if !u.asRoot && mode&0o700 != 0o700 {
		u.restore[name] = mode
		mode |= 0o700
	} else {
		delete(u.restore, name)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return ioErr(err, hdr.Name)
	}
	return nil
}

// finish gives the directories chmodDir deferred their modes, deepest
// first.
func (u *unpacker) finish() error {
	names := make([]string, 0, len(u.restore))
	for n := range u.restore {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return strings.Count(names[i], "/") > strings.Count(names[j], "/") })
	for _, n := range names {
		fd, err := safecopy.OpenBeneath(u.root, n, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			continue // replaced by a later layer, or reached through a link
		}
		unix.Fchmod(fd, u.restore[n])
		unix.Close(fd)
	}
	return nil
}

// opaque empties dir of what the layers below put there.
func (u *unpacker) opaque(dir string) error {
	fd, err := u.openIn(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return u.resolveErr(err, dir)
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if err != nil {
		return ioErr(err, dir)
	}
	for _, n := range names {
		if u.seen[path.Join(dir, n)] {
			continue
		}
		if err := removeAt(fd, n); err != nil {
			return ioErr(err, path.Join(dir, n))
		}
	}
	return nil
}

// whiteout removes p as the layers below left it.
func (u *unpacker) whiteout(p string) error {
	if u.seen[p] {
		return nil
	}
	dir, base := path.Split(p)
	fd, err := u.openIn(path.Clean(dir), unix.O_PATH|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return u.resolveErr(err, p)
	}
	defer u.closeDir(fd)
	if err := removeAt(fd, base); err != nil && !errors.Is(err, unix.ENOENT) {
		return ioErr(err, p)
	}
	return nil
}

// noResolveInRoot, set by tests, makes openIn act as on a kernel
// without openat2.
var noResolveInRoot bool

// openIn opens rel beneath the root: symlinks resolve inside it
// (RESOLVE_IN_ROOT), or are refused where openat2 is missing.
func (u *unpacker) openIn(rel string, flags int) (int, error) {
	if rel == "." {
		return unix.Openat(u.root, ".", flags|unix.O_CLOEXEC, 0)
	}
	if noResolveInRoot {
		return safecopy.OpenBeneath(u.root, rel, flags)
	}
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	for {
		fd, err := unix.Openat2(u.root, rel, how)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			return safecopy.OpenBeneath(u.root, rel, flags)
		}
		return fd, err
	}
}

// mkdirAll opens directory rel beneath the root (O_PATH), creating what
// is missing (0755, owned by the store, as image tools do).
func (u *unpacker) mkdirAll(rel, entry string) (int, error) {
	fd, err := u.openIn(rel, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil || !errors.Is(err, unix.ENOENT) || rel == "." {
		if err != nil {
			return -1, u.resolveErr(err, entry)
		}
		return fd, nil
	}
	dir, base := path.Split(rel)
	pfd, err := u.mkdirAll(path.Clean(dir), entry)
	if err != nil {
		return -1, err
	}
	defer u.closeDir(pfd)
	if err := unix.Mkdirat(pfd, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, ioErr(err, entry)
	}
	fd, err = unix.Openat(pfd, base, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, u.resolveErr(err, entry)
	}
	return fd, nil
}

func (u *unpacker) closeDir(fd int) {
	if fd != u.root {
		unix.Close(fd)
	}
}

func (u *unpacker) resolveErr(err error, entry string) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return unsafeEntry(entry, "its directory is reached through a symlink the store cannot resolve inside the image")
	case errors.Is(err, unix.ENOTDIR):
		return invalid("layer entry %q: a parent is not a directory", entry).With("entry", entry)
	}
	return ioErr(err, entry)
}

// readErr is an error reading a layer: the stream's own coded error
// (streamCap's image.too_large), or image.invalid.
func readErr(err error, msg string) error {
	var jerr *job.Error
	if errors.As(err, &jerr) {
		return jerr
	}
	return job.Wrap(job.CodeImageInvalid, err, msg)
}

func ioErr(err error, entry string) error {
	return job.Wrap(job.CodeRunIOFailed, err, "cannot unpack a layer entry").With("entry", entry)
}

// removeAt removes name in dirfd, a directory with everything below it;
// no symlink is followed.
func removeAt(dirfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dirfd, name, 0)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	unix.Fchmod(fd, 0o700)
	names, err := readNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// readNames lists the directory fd (its offset is left at the end).
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}
