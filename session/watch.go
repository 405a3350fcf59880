package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
)

// MaxWatchedDirs bounds the directories one recursive WatchEntries
// watches.
const MaxWatchedDirs = 4096

// EntryEvent is a change under a watched directory: Op "create",
// "write", "remove", "rename" (the old name; the new one is a create)
// or "chmod", of Path, relative to the watched directory.
type EntryEvent struct {
	Op   string
	Path string
}

// watchMask are the inotify events WatchEntries reports.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// WatchEntries reports the changes under directory rel of running or
// paused sandbox id's workspace (recursive: under its subdirectories
// too, those created later included) to send, calling started once the
// watch is in place, until ctx ends or the directory goes (its sandbox
// ended); it then returns nil. Directories are opened beneath the
// workspace without following a symlink, as ListEntries's are.
func (s *Service) WatchEntries(ctx context.Context, id, rel string, recursive bool, started func() error, send func(EntryEvent) error) error {
	clean, err := workspacePath(rel)
	if err != nil {
		return err
	}
	h, err := s.running(id, StateRunning, StatePaused)
	if err != nil {
		return err
	}
	workspace := h.sb.Workspace()
	h.mu.Unlock()
	root, err := unix.Open(workspace, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fileError(err, rel, s.cfg.MaxFileBytes)
	}
	defer unix.Close(root)
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return job.Wrap(job.CodeInternal, err, "cannot watch files")
	}
	in := os.NewFile(uintptr(ifd), "inotify")
	defer in.Close()
	w := &watcher{ifd: ifd, root: root, base: clean, dirs: map[int]string{}, recursive: recursive}
	if err := w.add("."); err != nil {
		return fileError(err, rel, s.cfg.MaxFileBytes)
	}
	if err := started(); err != nil {
		return err
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			in.Close()
		case <-stop:
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := in.Read(buf)
		if err != nil {
			return nil // ctx ended (the file was closed)
		}
		done, err := w.events(buf[:n], send)
		if err != nil || done {
			return err
		}
	}
}

// watcher is one WatchEntries's inotify watches: the watched directory
// base (relative to the workspace root) and its subdirectories, by
// watch descriptor.
type watcher struct {
	ifd, root int
	base      string
	dirs      map[int]string
	recursive bool
}

// add watches directory sub of the watched one (and with recursive, its
// subdirectories).
func (w *watcher) add(sub string) error {
	if len(w.dirs) >= MaxWatchedDirs {
		return job.Errorf(job.CodeLimitExceeded, "a watch covers at most %d directories", MaxWatchedDirs).With("max", MaxWatchedDirs)
	}
	fd, err := safecopy.OpenBeneath(w.root, path.Join(w.base, sub), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// The watch is on the directory the descriptor holds, reached
	// through its /proc link, never through the path again.
	wd, err := unix.InotifyAddWatch(w.ifd, fmt.Sprintf("/proc/self/fd/%d", fd), watchMask)
	if err != nil {
		return err
	}
	w.dirs[wd] = sub
	if !w.recursive {
		return nil
	}
	names, err := namesAt(fd)
	if err != nil {
		return err
	}
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := w.add(path.Join(sub, name)); err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
	}
	return nil
}

// events sends the events in buf; done once the watched directory went.
func (w *watcher) events(buf []byte, send func(EntryEvent) error) (done bool, err error) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		name := string(nameBytes)
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		dir, ok := w.dirs[int(ev.Wd)]
		if !ok {
			continue
		}
		if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_IGNORED) != 0 {
			delete(w.dirs, int(ev.Wd))
			if dir == "." {
				return true, nil
			}
			continue
		}
		p := path.Join(dir, name)
		var op string
		switch {
		case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			op = "create"
			if w.recursive && ev.Mask&unix.IN_ISDIR != 0 {
				if err := w.add(p); err != nil && !errors.Is(err, unix.ENOENT) {
					return false, err
				}
			}
		case ev.Mask&unix.IN_MODIFY != 0:
			op = "write"
		case ev.Mask&unix.IN_DELETE != 0:
			op = "remove"
		case ev.Mask&unix.IN_MOVED_FROM != 0:
			op = "rename"
		case ev.Mask&unix.IN_ATTRIB != 0:
			op = "chmod"
		default:
			continue
		}
		if err := send(EntryEvent{Op: op, Path: p}); err != nil {
			return false, err
		}
	}
	return false, nil
}

// namesAt are the names in directory fd (which it leaves open).
func namesAt(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}
