package e2bapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// Bounds of the polled watchers (CreateWatcher): how many the door
// keeps, and how many events one holds between two polls (the oldest go
// first).
const (
	maxWatchers       = 256
	maxWatcherBacklog = 10000
)

// watchers are the polled watchers, by id: each a watch of its own
// that runs until RemoveWatcher or its sandbox's end.
type watchers struct {
	mu   sync.Mutex
	byID map[string]*polled
}

// polled is one polled watcher: the events since the last poll, and how
// its watch ended.
type polled struct {
	sandbox string
	cancel  context.CancelFunc
	mu      sync.Mutex
	events  []*filesystem.FilesystemEvent
	ended   bool
	err     error
}

func (p *polled) isEnded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

func (p *polled) add(ev *filesystem.FilesystemEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.events) >= maxWatcherBacklog {
		p.events = p.events[1:]
	}
	p.events = append(p.events, ev)
}

// CreateWatcher starts a watch whose events GetWatcherEvents polls.
func (f *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	id, rel, err := f.target(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if err := watchOptions(req.Msg.GetIncludeEntry(), req.Msg.GetAllowNetworkMounts()); err != nil {
		return nil, err
	}
	w := &f.d.watchers
	w.mu.Lock()
	for wid, p := range w.byID {
		// A watch that ended (its directory or sandbox went) and was
		// never polled again holds no slot.
		if p.isEnded() {
			delete(w.byID, wid)
		}
	}
	if len(w.byID) >= maxWatchers {
		w.mu.Unlock()
		return nil, rpcError(job.Errorf(job.CodeSessionLimit, "the server keeps at most %d watchers; remove one first", maxWatchers))
	}
	if w.byID == nil {
		w.byID = map[string]*polled{}
	}
	var b [12]byte
	rand.Read(b[:])
	wid := "w_" + hex.EncodeToString(b[:])
	wctx, cancel := context.WithCancel(context.Background())
	p := &polled{sandbox: id, cancel: cancel}
	w.byID[wid] = p
	w.mu.Unlock()
	started := make(chan error, 1)
	go func() {
		err := f.d.cfg.Sessions.WatchEntries(wctx, id, rel, req.Msg.GetRecursive(), func() error {
			started <- nil
			return nil
		}, func(e session.EntryEvent) error {
			p.add(fsEvent(e))
			return nil
		})
		started <- err
		p.mu.Lock()
		p.ended, p.err = true, err
		p.mu.Unlock()
	}()
	if err := <-started; err != nil {
		f.d.removeWatcher(wid)
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: wid}), nil
}

// GetWatcherEvents answers the events since the last poll; a watcher
// whose watch ended answers its last events, then is gone.
func (f *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	p, err := f.watcher(req.Header(), req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	events, ended, werr := p.events, p.ended, p.err
	p.events = nil
	p.mu.Unlock()
	if ended && len(events) == 0 {
		f.d.removeWatcher(req.Msg.GetWatcherId())
		if werr != nil {
			return nil, rpcError(werr)
		}
		return nil, connect.NewError(connect.CodeNotFound, errWatchEnded)
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: events}), nil
}

// RemoveWatcher stops a watcher.
func (f *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	if _, err := f.watcher(req.Header(), req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	f.d.removeWatcher(req.Msg.GetWatcherId())
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}

// watcher is the call's sandbox's watcher wid.
func (f *filesystemService) watcher(h http.Header, wid string) (*polled, error) {
	id, err := f.d.rpcSandbox(h)
	if err != nil {
		return nil, err
	}
	w := &f.d.watchers
	w.mu.Lock()
	p := w.byID[wid]
	w.mu.Unlock()
	if p == nil || p.sandbox != id {
		return nil, connect.NewError(connect.CodeNotFound, errNoWatcher)
	}
	return p, nil
}

// removeWatcher stops watcher wid and forgets it.
func (d *Door) removeWatcher(wid string) {
	d.watchers.mu.Lock()
	p := d.watchers.byID[wid]
	delete(d.watchers.byID, wid)
	d.watchers.mu.Unlock()
	if p != nil {
		p.cancel()
	}
}
