package e2bapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem/filesystemconnect"
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
// sandbox's processes see it, Go's mode bits (envd is Go too), owner and
// group by number.
func (d *Door) entryInfo(e session.Entry) *filesystem.EntryInfo {
	p := d.sandboxPath(e.Path)
	info := &filesystem.EntryInfo{
		Name: path.Base(p), Path: p, Size: e.Size, Mode: uint32(e.Mode), Permissions: e.Mode.String(),
		Owner: strconv.FormatUint(uint64(e.UID), 10), Group: strconv.FormatUint(uint64(e.GID), 10),
		ModifiedTime: timestamppb.New(e.ModTime),
	}
	switch e.Type {
	case "file":
		info.Type = filesystem.FileType_FILE_TYPE_FILE
	case "dir":
		info.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	case "symlink":
		info.Type = filesystem.FileType_FILE_TYPE_SYMLINK
		info.SymlinkTarget = &e.Target
	}
	return info
}

// Stat describes one entry (files.exists, files.getInfo).
func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := f.d.cfg.Sessions.StatEntry(ctx, id, rel)
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
	e, created, err := f.d.cfg.Sessions.MakeDirEntry(ctx, id, rel)
	if err != nil {
		return nil, rpcError(err)
	}
	if !created {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists", req.Msg.GetPath()))
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: f.d.entryInfo(e)}), nil
}

// Move renames an entry (files.rename).
func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	id, from, err := f.target(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	to, err := f.d.workspacePath(req.Msg.GetDestination())
	if err != nil {
		return nil, rpcError(err)
	}
	e, err := f.d.cfg.Sessions.MoveEntry(ctx, id, from, to)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: f.d.entryInfo(e)}), nil
}

// ListDir lists a directory to depth levels (files.list).
func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	es, err := f.d.cfg.Sessions.ListEntries(ctx, id, rel, depth)
	if err != nil {
		return nil, rpcError(err)
	}
	out := &filesystem.ListDirResponse{}
	for _, e := range es {
		out.Entries = append(out.Entries, f.d.entryInfo(e))
	}
	return connect.NewResponse(out), nil
}

// Remove removes a file, a symlink, or a directory with what it holds.
func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if err := f.d.cfg.Sessions.RemoveEntry(ctx, id, rel); err != nil {
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
