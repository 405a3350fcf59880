package e2bapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem/filesystemconnect"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// filesystemService is envd's filesystem.Filesystem over the session
// service's file-tree calls and watches.
type filesystemService struct{ d *Door }

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// target authenticates a call and maps its path onto the workspace.
func (f *filesystemService) target(h http.Header, p string) (id, rel string, err error) {
	if id, err = f.d.rpcSandbox(h); err != nil {
		return "", "", err
	}
	if rel, err = f.d.workspacePath(p); err != nil {
		return "", "", rpcError(err)
	}
	return id, rel, nil
}

// entryInfo is a workspace entry as envd describes it: its path as the
// sandbox's processes see it, Go's mode bits (envd is Go too) and their
// string; the owner is not known here.
func (d *Door) entryInfo(e session.FileEntry) *filesystem.EntryInfo {
	p := d.sandboxPath(e.Path)
	mode := entryMode(e)
	info := &filesystem.EntryInfo{
		Name: path.Base(p), Path: p, Size: e.Size, Mode: uint32(mode), Permissions: mode.String(),
		ModifiedTime: timestamppb.New(e.ModifiedAt),
	}
	switch e.Type {
	case backend.FileRegular:
		info.Type = filesystem.FileType_FILE_TYPE_FILE
	case backend.FileDir:
		info.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	case backend.FileSymlink:
		info.Type = filesystem.FileType_FILE_TYPE_SYMLINK
		if e.SymlinkTarget != "" {
			info.SymlinkTarget = &e.SymlinkTarget
		}
	}
	return info
}

// entryMode is an entry's mode as package fs holds it, from its octal
// permission digits and its type.
func entryMode(e session.FileEntry) fs.FileMode {
	bits, _ := strconv.ParseUint(e.Mode, 8, 32)
	mode := fs.FileMode(bits & 0o777)
	for bit, m := range map[uint64]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if bits&bit != 0 {
			mode |= m
		}
	}
	switch e.Type {
	case backend.FileDir:
		mode |= fs.ModeDir
	case backend.FileSymlink:
		mode |= fs.ModeSymlink
	case backend.FileRegular:
	default:
		mode |= fs.ModeIrregular
	}
	return mode
}

// Stat describes one entry (files.exists, files.getInfo).
func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := f.d.cfg.Sessions.StatFile(ctx, id, rel)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: f.d.entryInfo(e)}), nil
}

// MakeDir creates a directory and its parents; one that exists is
// AlreadyExists (the SDKs answer false).
func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	created, err := f.d.cfg.Sessions.MakeDir(ctx, id, rel)
	if err != nil {
		return nil, rpcError(err)
	}
	if !created {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists", req.Msg.GetPath()))
	}
	e, err := f.d.cfg.Sessions.StatFile(ctx, id, rel)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: f.d.entryInfo(e)}), nil
}

// Move renames an entry (files.rename), making the destination's
// missing parents.
func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	id, from, err := f.target(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	to, err := f.d.workspacePath(req.Msg.GetDestination())
	if err != nil {
		return nil, rpcError(err)
	}
	if err := f.d.cfg.Sessions.MoveFile(ctx, id, from, to); err != nil {
		return nil, rpcError(err)
	}
	e, err := f.d.cfg.Sessions.StatFile(ctx, id, to)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: f.d.entryInfo(e)}), nil
}

// maxListed bounds the entries one ListDir answers, all levels together.
const maxListed = backend.DefaultMaxDirEntries

// ListDir lists a directory to depth levels (files.list), a level's
// directories before what they hold; symlinks are listed, not entered.
// More than maxListed entries is refused rather than cut short.
func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	out := &filesystem.ListDirResponse{}
	if err := f.list(ctx, id, rel, depth, out); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) list(ctx context.Context, id, rel string, depth int, out *filesystem.ListDirResponse) error {
	l, err := f.d.cfg.Sessions.ListFiles(ctx, id, rel)
	if err != nil {
		return err
	}
	if l.Truncated || len(out.Entries)+len(l.Entries) > maxListed {
		return job.Errorf(job.CodeLimitExceeded, "the listing holds more than %d entries; list a smaller directory or depth", maxListed)
	}
	for _, e := range l.Entries {
		out.Entries = append(out.Entries, f.d.entryInfo(e))
		if e.Type == backend.FileDir && depth > 1 {
			if err := f.list(ctx, id, e.Path, depth-1, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove removes a file, a symlink, or a directory with what it holds.
func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if err := f.d.cfg.Sessions.RemoveFile(ctx, id, rel, true); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// WatchDir streams the changes under a directory (files.watchDir): a
// start once it watches, then each change, until the client leaves, the
// call's timeout, or the sandbox ends.
func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return err
	}
	if err := watchOptions(req.Msg.GetIncludeEntry(), req.Msg.GetAllowNetworkMounts()); err != nil {
		return err
	}
	send := streamSender(ctx, req.Header(), stream.Send, func() *filesystem.WatchDirResponse {
		return &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}
	})
	err = f.d.cfg.Sessions.WatchEntries(ctx, id, rel, req.Msg.GetRecursive(), func() error {
		return send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}})
	}, func(e session.EntryEvent) error {
		return send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: fsEvent(e)}})
	})
	if err != nil {
		return rpcError(err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the watch's timeout ran out"))
	}
	return nil
}

// watchOptions refuses the watch options the door does not offer.
func watchOptions(includeEntry, networkMounts bool) error {
	switch {
	case includeEntry:
		return rpcError(notSupported("include_entry in watch events"))
	case networkMounts:
		return rpcError(notSupported("watching network mounts"))
	}
	return nil
}

// fsEvent is a change as envd reports it: its path relative to the
// watched directory and its type.
func fsEvent(e session.EntryEvent) *filesystem.FilesystemEvent {
	types := map[string]filesystem.EventType{
		"create": filesystem.EventType_EVENT_TYPE_CREATE, "write": filesystem.EventType_EVENT_TYPE_WRITE,
		"remove": filesystem.EventType_EVENT_TYPE_REMOVE, "rename": filesystem.EventType_EVENT_TYPE_RENAME,
		"chmod": filesystem.EventType_EVENT_TYPE_CHMOD,
	}
	return &filesystem.FilesystemEvent{Name: e.Path, Type: types[e.Op]}
}
