package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/agent/rootfs"
	"github.com/agent-runner/agent-runner/job"
)

// locateRead is the policy check for a read path: lexical, no I/O.
func (g *Gateway) locateRead(field, p string) (rootfs.Location, *job.Error) {
	loc, err := rootfs.Locate(g.policy.ReadRoots, g.cwd, p)
	if err != nil {
		return loc, pathDenied(field, p, err)
	}
	return loc, nil
}

func pathDenied(field, p string, err error) *job.Error {
	msg := fmt.Sprintf("%s %q denied: %v", field, p, err)
	if errors.Is(err, rootfs.ErrOutside) {
		msg = fmt.Sprintf("%s %q is outside the read allowlist", field, p)
	}
	return job.Wrap(job.CodePathEscape, err, msg).With("field", field).With("path", p)
}

// openFile opens loc for reading and requires a regular file.
func openFile(field, p string, loc rootfs.Location) (*os.File, os.FileInfo, error) {
	f, err := rootfs.Open(loc, unix.O_RDONLY)
	if err != nil {
		return nil, nil, openErr(field, p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, job.Wrap(job.CodeRunIOFailed, err, "stat failed").With("path", p)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, job.Errorf(job.CodeInvalidRequest, "%s %q is not a regular file", field, p).With("path", p)
	}
	return f, fi, nil
}

func openDir(field, p string, loc rootfs.Location) (*os.File, error) {
	f, err := rootfs.Open(loc, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, openErr(field, p, err)
	}
	return f, nil
}

func openErr(field, p string, err error) *job.Error {
	switch {
	case errors.Is(err, rootfs.ErrSymlink), errors.Is(err, rootfs.ErrOutside), errors.Is(err, rootfs.ErrNotDir):
		return pathDenied(field, p, err)
	case errors.Is(err, os.ErrNotExist):
		return job.Wrap(job.CodeRunIOFailed, err, fmt.Sprintf("%s %q does not exist", field, p)).With("path", p)
	}
	return job.Wrap(job.CodeRunIOFailed, err, fmt.Sprintf("cannot open %s %q", field, p)).With("path", p)
}

// ListLogsArgs are list_logs arguments.
type ListLogsArgs struct {
	Directory string `json:"directory" desc:"directory under a read root"`
}

// Entry is one directory entry.
type Entry struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	SizeBytes int64  `json:"size_bytes"`
}

// ListLogsResult is the list_logs result.
type ListLogsResult struct {
	Directory string  `json:"directory"`
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated"`
}

// MaxListEntries bounds one listing.
const MaxListEntries = 10000

func listLogs(g *Gateway, a *ListLogsArgs) (func(context.Context) (ListLogsResult, error), *job.Error) {
	loc, jerr := g.locateRead("directory", a.Directory)
	if jerr != nil {
		return nil, jerr
	}
	return func(ctx context.Context) (ListLogsResult, error) {
		d, err := openDir("directory", a.Directory, loc)
		if err != nil {
			return ListLogsResult{}, err
		}
		defer d.Close()
		ents, err := d.ReadDir(MaxListEntries + 1)
		if err != nil && err != io.EOF {
			return ListLogsResult{}, job.Wrap(job.CodeRunIOFailed, err, "read directory").With("path", a.Directory)
		}
		res := ListLogsResult{Directory: a.Directory, Entries: []Entry{}}
		sortEntries(ents)
		if len(ents) > MaxListEntries {
			ents, res.Truncated = ents[:MaxListEntries], true
		}
		for _, e := range ents {
			en := Entry{Name: e.Name(), Type: "other"}
			switch {
			case e.Type().IsRegular():
				en.Type = "file"
				if fi, err := e.Info(); err == nil {
					en.SizeBytes = fi.Size()
				}
			case e.IsDir():
				en.Type = "dir"
			case e.Type()&os.ModeSymlink != 0:
				en.Type = "symlink"
			}
			res.Entries = append(res.Entries, en)
		}
		return res, nil
	}, nil
}

// ReadLogArgs are read_log arguments.
type ReadLogArgs struct {
	Path string `json:"path" desc:"file under a read root"`
}

// ReadLogResult is the read_log result; Content holds at most MaxReadBytes.
type ReadLogResult struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	SizeBytes int64  `json:"size_bytes"`
	Truncated bool   `json:"truncated"`
}

// MaxReadBytes is read_log's cap (512 KiB).
const MaxReadBytes = 512 << 10

func readLog(g *Gateway, a *ReadLogArgs) (func(context.Context) (ReadLogResult, error), *job.Error) {
	loc, jerr := g.locateRead("path", a.Path)
	if jerr != nil {
		return nil, jerr
	}
	return func(ctx context.Context) (ReadLogResult, error) {
		f, fi, err := openFile("path", a.Path, loc)
		if err != nil {
			return ReadLogResult{}, err
		}
		defer f.Close()
		buf, err := io.ReadAll(io.LimitReader(f, MaxReadBytes+1))
		if err != nil {
			return ReadLogResult{}, job.Wrap(job.CodeRunIOFailed, err, "read failed").With("path", a.Path)
		}
		res := ReadLogResult{Path: a.Path, SizeBytes: fi.Size()}
		if len(buf) > MaxReadBytes {
			buf, res.Truncated = buf[:MaxReadBytes], true
		}
		res.Content = string(buf)
		return res, nil
	}, nil
}

// sortEntries orders a directory listing by name so results are stable.
func sortEntries(ents []fs.DirEntry) {
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
}
