package sessionremote

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-runner/agent-runner/natsconn"
	"github.com/agent-runner/agent-runner/session"
)

// Host is a worker's side: it serves the sessions door over NATS to the
// API node, heartbeats its load and sends its records.
type Host struct {
	nc     *nats.Conn
	worker string
	log    *slog.Logger
	mu     sync.Mutex
	inst   instance // "" until Run listens
}

// NewHost is the host of the worker whose identity is worker
// (queue.WorkerID of its token) on nc.
func NewHost(nc *nats.Conn, worker string, log *slog.Logger) *Host {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Host{nc: nc, worker: worker, log: log}
}

// Saved sends rec, a record the worker's session service wrote, to the
// API node (session.Config.Saved).
func (h *Host) Saved(rec session.Record) {
	h.mu.Lock()
	inst := h.inst
	h.mu.Unlock()
	if inst == "" {
		return
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = h.nc.Publish(inst.from()+"."+kindRecord, b)
	}
	if err != nil {
		h.log.Warn("cannot send a sandbox record to the API node", "id", rec.ID, "error", err)
	}
}

// Publish sends a run's status (session.EventRun), an event of the
// worker's session service (session.Config.Events), to the API node,
// which puts it on its bus (session.Service.RelayRun): a worker may not
// publish sandbox events itself. Anything else is dropped: a state
// change reaches the API node with its record (Saved), which publishes
// it there.
func (h *Host) Publish(kind, id, typ string, payload any) error {
	ev, ok := payload.(session.RunEvent)
	if kind != session.EventKind || typ != session.EventRun || !ok {
		return nil
	}
	h.mu.Lock()
	inst := h.inst
	h.mu.Unlock()
	if inst == "" {
		return nil
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return h.nc.Publish(inst.from()+"."+kindRun, b)
}

var _ session.Publisher = (*Host)(nil)

// Run serves door (the sessions routes over svc, without authorization:
// the API node authorized each call) until ctx ends. When the API node
// says this worker was lost (it was not heard for too long), its
// sandboxes, already failed there, are ended here and it serves again
// as a new instance.
func (h *Host) Run(ctx context.Context, svc *session.Service, door http.Handler, backends []string) error {
	for {
		lost, err := h.serve(ctx, svc, door, backends)
		if err != nil || !lost {
			return err
		}
		svc.Close()
		h.log.Warn("the API node declared this worker lost: its sandboxes were ended; serving again as a new instance")
	}
}

// serve is one instance's life: it reports whether it ended because the
// API node declared it lost.
func (h *Host) serve(ctx context.Context, svc *session.Service, door http.Handler, backends []string) (bool, error) {
	inst := instance(h.worker + "." + strings.ToLower(rand.Text()[:12]))
	l, err := natsconn.Listen(h.nc, inst.addr(), natsconn.Config{})
	if err != nil {
		return false, err
	}
	lost := make(chan struct{}, 1)
	sub, err := h.nc.Subscribe(inst.to()+"."+kindLost, func(*nats.Msg) {
		select {
		case lost <- struct{}{}:
		default:
		}
	})
	if err != nil {
		l.Close()
		return false, err
	}
	defer sub.Unsubscribe()
	srv := &http.Server{Handler: door, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	h.mu.Lock()
	h.inst = inst
	h.mu.Unlock()
	h.log.Info("serving kept sandboxes over NATS", "instance", string(inst))
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		h.beat(inst, svc, backends)
		select {
		case <-ctx.Done():
			return false, nil
		case <-lost:
			return true, nil
		case <-t.C:
		}
	}
}

// beat sends the host's load.
func (h *Host) beat(inst instance, svc *session.Service, backends []string) {
	live, max := svc.Load()
	b, _ := json.Marshal(Heartbeat{Live: live, Max: max, Backends: backends})
	if err := h.nc.Publish(inst.from()+"."+kindBeat, b); err != nil {
		h.log.Warn("cannot send a heartbeat", "error", err)
	}
}
