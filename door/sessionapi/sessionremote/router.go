package sessionremote

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/natsconn"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/session"
)

// RouterConfig is the API node's side.
type RouterConfig struct {
	Conn *nats.Conn
	// Service is the API node's session service: its records hold the
	// sandboxes placed on workers, and it holds this node's own.
	Service *session.Service
	// Local says this node hosts sandboxes too (its Service creates
	// them); LocalBackends are the kinds it offers.
	Local         bool
	LocalBackends []string
	// LostAfter is how long a worker may go unheard before it is lost
	// (default DefaultLostAfter; at least 2 heartbeats).
	LostAfter time.Duration
	// Claim, when set, binds run runID (an exec or a process of a
	// sandbox on worker, whose record the worker then sends over the
	// record mirror) to worker, the worker's identity (package remote
	// accepts the record from that worker only).
	Claim func(ctx context.Context, worker, runID string) error
	// Conns tunes the connections to workers (natsconn's defaults).
	Conns  natsconn.Config
	Logger *slog.Logger
}

// DefaultLostAfter is RouterConfig.LostAfter's default.
const DefaultLostAfter = 5 * time.Second

// Router routes sandbox calls to the workers that hold them.
type Router struct {
	cfg     RouterConfig
	started time.Time
	subs    []*nats.Subscription
	tr      *http.Transport

	mu      sync.Mutex
	workers map[instance]*workerState
	// conns are the open connections to each worker, closed when it is
	// lost.
	conns map[instance]map[*trackedConn]struct{}
}

// workerState is what the router knows of one worker instance.
type workerState struct {
	heard time.Time
	beat  Heartbeat
	// placed counts creates sent since its last heartbeat.
	placed int
	lost   bool
}

// NewRouter hears the workers' heartbeats, records and run events on
// cfg.Conn.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.LostAfter <= 0 {
		cfg.LostAfter = DefaultLostAfter
	}
	cfg.LostAfter = max(cfg.LostAfter, 2*HeartbeatInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Router{cfg: cfg, started: time.Now(), workers: map[instance]*workerState{}, conns: map[instance]map[*trackedConn]struct{}{}}
	// Every call dials afresh (a NATS round trip): a worker that is
	// gone is then told at once by the server ("no responders"), where a
	// kept connection would wait out the peer timeout.
	r.tr = &http.Transport{DialContext: r.dial, DisableKeepAlives: true, DisableCompression: true}
	for _, k := range []struct {
		kind string
		h    func(instance, *nats.Msg)
	}{{kindBeat, r.heard}, {kindRecord, r.record}, {kindRun, r.run}} {
		sub, err := cfg.Conn.Subscribe(queue.SandboxesFromPrefix+"*.*."+k.kind, func(m *nats.Msg) {
			if inst, _, ok := fromSubject(m.Subject); ok {
				k.h(inst, m)
			}
		})
		if err != nil {
			r.Close()
			return nil, job.Wrap(job.CodeQueueClosed, err, "cannot hear the sandbox workers")
		}
		r.subs = append(r.subs, sub)
	}
	return r, nil
}

// Close stops hearing workers and closes the idle connections.
func (r *Router) Close() {
	for _, s := range r.subs {
		s.Unsubscribe()
	}
	r.tr.CloseIdleConnections()
}

// heard takes a heartbeat. A worker declared lost is told so (it ends
// its sandboxes and comes back as a new instance).
func (r *Router) heard(inst instance, m *nats.Msg) {
	var hb Heartbeat
	if err := json.Unmarshal(m.Data, &hb); err != nil || hb.Live < 0 || hb.Max < 0 || len(hb.Backends) > maxBackends {
		r.cfg.Logger.Warn("a malformed sandbox heartbeat", "worker", string(inst))
		return
	}
	r.mu.Lock()
	w := r.workers[inst]
	if w == nil {
		w = &workerState{}
		r.workers[inst] = w
		r.cfg.Logger.Info("sandbox worker joined", "worker", string(inst), "max", hb.Max, "backends", hb.Backends)
	}
	lost := w.lost
	if !lost {
		w.heard, w.beat, w.placed = time.Now(), hb, 0
	}
	r.mu.Unlock()
	if lost {
		r.cfg.Conn.Publish(inst.to()+"."+kindLost, nil)
	}
}

// record applies a record a worker sent of one of its sandboxes.
func (r *Router) record(inst instance, m *nats.Msg) {
	var rec session.Record
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		r.cfg.Logger.Warn("a malformed sandbox record", "worker", string(inst), "error", err)
		return
	}
	if err := r.cfg.Service.Mirror(string(inst), rec); err != nil {
		r.cfg.Logger.Warn("a sandbox record refused", "worker", string(inst), "id", rec.ID, "error", err)
	}
}

// run puts a run's status a worker sent of one of its sandboxes on this
// node's bus.
func (r *Router) run(inst instance, m *nats.Msg) {
	var ev session.RunEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		r.cfg.Logger.Warn("a malformed sandbox run event", "worker", string(inst), "error", err)
		return
	}
	if err := r.cfg.Service.RelayRun(string(inst), ev); err != nil {
		r.cfg.Logger.Warn("a sandbox run event refused", "worker", string(inst), "id", ev.SandboxID, "run_id", ev.RunID, "error", err)
	}
}

// WorkerLoad is what the router knows of one worker instance.
type WorkerLoad struct {
	Name      string
	Heartbeat Heartbeat
	Heard     time.Time
	Lost      bool
}

// Workers are the worker instances heard, by name.
func (r *Router) Workers() []WorkerLoad {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]WorkerLoad, 0, len(r.workers))
	for inst, w := range r.workers {
		out = append(out, WorkerLoad{Name: string(inst), Heartbeat: w.beat, Heard: w.heard, Lost: w.lost})
	}
	slices.SortFunc(out, func(a, b WorkerLoad) int { return strings.Compare(a.Name, b.Name) })
	return out
}
