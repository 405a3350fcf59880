package e2bapi

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem/filesystemconnect"
)

// filesystemService is envd's filesystem.Filesystem. The session service
// reads and writes files (GET and POST /files) but does not list, stat,
// create directories, move, remove or watch yet, so these calls answer
// Unimplemented, naming the call.
type filesystemService struct{ d *Door }

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// unsupported authenticates a call and answers that it is not
// supported.
func (f *filesystemService) unsupported(h http.Header, call string) error {
	if _, err := f.d.rpcSandbox(h); err != nil {
		return err
	}
	return rpcError(notSupported("filesystem." + call))
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	return nil, f.unsupported(req.Header(), "Stat (files.exists, files.getInfo)")
}

func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	return nil, f.unsupported(req.Header(), "MakeDir (files.makeDir)")
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	return nil, f.unsupported(req.Header(), "Move (files.rename)")
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	return nil, f.unsupported(req.Header(), "ListDir (files.list)")
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	return nil, f.unsupported(req.Header(), "Remove (files.remove)")
}

func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], _ *connect.ServerStream[filesystem.WatchDirResponse]) error {
	return f.unsupported(req.Header(), "WatchDir (files.watchDir)")
}

func (f *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	return nil, f.unsupported(req.Header(), "CreateWatcher")
}

func (f *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	return nil, f.unsupported(req.Header(), "GetWatcherEvents")
}

func (f *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	return nil, f.unsupported(req.Header(), "RemoveWatcher")
}
