package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-runner/agent-runner/job"
)

// Defaults of the Config bounds.
const (
	DefaultMaxConns      = 256
	DefaultHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout   = 90 * time.Second
	DefaultDialTimeout   = 10 * time.Second

	DefaultMaxNames          = 256              // distinct names a run may have resolved
	DefaultRefusalsPerKey    = 5                // refusals recorded one by one per (host, reason)
	DefaultMaxRefusalRecords = 100              // refusals recorded one by one per run
	DefaultSummaryInterval   = 10 * time.Second // between refusal summaries and refusal log lines
)

// Config is the operator's side of the gateway, shared by all runs.
type Config struct {
	// Resolve pins names like curl --resolve: "host:port" (or "host" for
	// any port) to an IP address. A pinned name is dialed at that address
	// even when it is private or loopback.
	Resolve map[string]string
	// UpstreamRoots verifies the upstreams of intercepted connections;
	// nil means the system roots.
	UpstreamRoots *x509.CertPool
	// Metrics, when set, receives agent_runner_egress_connections_total
	// {decision} and agent_runner_egress_bytes_total{direction}.
	Metrics prometheus.Registerer
	// Logger, when set, receives a line per allowed Decision at Debug and,
	// at Info, at most one refusal per SummaryInterval per run (with the
	// count of refusals not logged since the last line) and one line at
	// the end of a run that had refusals not logged or not recorded, all
	// in the group "egress".
	Logger *slog.Logger

	MaxConns      int           // concurrent connections per run; 0: DefaultMaxConns
	HeaderTimeout time.Duration // to read a request's header or a tunnel's first bytes; 0: DefaultHeaderTimeout
	IdleTimeout   time.Duration // between requests on a kept-alive connection; 0: DefaultIdleTimeout
	DialTimeout   time.Duration // to resolve and connect an upstream; 0: DefaultDialTimeout

	// MaxNames bounds the distinct names a run has the gateway look up on
	// the host's resolver (pinned names aside): past it a new name is
	// refused (too_many_names) without a lookup. It bounds what a run can
	// send out through DNS labels under a wildcard rule. 0: DefaultMaxNames.
	MaxNames int
	// RefusalsPerKey and MaxRefusalRecords bound the refusals recorded one
	// by one (to Run.Audit): the first RefusalsPerKey per (host, reason),
	// at most MaxRefusalRecords per run. Later refusals are counted into
	// summary Decisions (ModeSummary), written every SummaryInterval and
	// when the run's Serve ends. 0: DefaultRefusalsPerKey,
	// DefaultMaxRefusalRecords, DefaultSummaryInterval.
	RefusalsPerKey    int
	MaxRefusalRecords int
	SummaryInterval   time.Duration
}

// Gateway serves the egress listeners of runs. One Gateway serves any
// number of runs at once.
type Gateway struct {
	pins          map[string]netip.Addr
	upstreamRoots *x509.CertPool
	sessions      tls.ClientSessionCache
	metrics       *metrics
	log           *slog.Logger
	local         *localAddrs
	lookup        func(ctx context.Context, host string) ([]netip.Addr, error)

	maxConns      int
	headerTimeout time.Duration
	idleTimeout   time.Duration
	dialTimeout   time.Duration

	maxNames        int
	refusalsPerKey  int
	maxRefusals     int
	summaryInterval time.Duration
}

// New checks cfg and builds a Gateway.
func New(cfg Config) (*Gateway, error) {
	pins, err := parsePins(cfg.Resolve)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{
		pins:          pins,
		upstreamRoots: cfg.UpstreamRoots,
		sessions:      tls.NewLRUClientSessionCache(256),
		metrics:       m,
		log:           log.WithGroup("egress"),
		local:         &localAddrs{ifAddrs: net.InterfaceAddrs},
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		maxConns:      orDefault(cfg.MaxConns, DefaultMaxConns),
		headerTimeout: orDefault(cfg.HeaderTimeout, DefaultHeaderTimeout),
		idleTimeout:   orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		dialTimeout:   orDefault(cfg.DialTimeout, DefaultDialTimeout),

		maxNames:        orDefault(cfg.MaxNames, DefaultMaxNames),
		refusalsPerKey:  orDefault(cfg.RefusalsPerKey, DefaultRefusalsPerKey),
		maxRefusals:     orDefault(cfg.MaxRefusalRecords, DefaultMaxRefusalRecords),
		summaryInterval: orDefault(cfg.SummaryInterval, DefaultSummaryInterval),
	}, nil
}

func orDefault[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Run is one run's egress policy.
type Run struct {
	ID string
	// Rules is the allowlist, already narrowed to the operator's ceiling
	// (Within). Once the run is served, change it with SetRules only.
	Rules    []Rule
	Bindings []Binding // secrets and the hosts they may be sent to
	// Audit receives one Decision per allowed connection when it ends,
	// the first refusals one by one, and summaries of the later ones
	// (Config.RefusalsPerKey). It is called from connection goroutines,
	// concurrently: it must be safe for concurrent use. nil drops the
	// records.
	Audit func(Decision)

	// rulesMu guards Rules once the run is served (SetRules).
	rulesMu sync.RWMutex
}

// SetRules replaces the run's allowlist while it is served: connections
// decided from now on are held to rules (a warm pool's sandbox is
// bridged before its user's allowlist is known, with none: every
// connection refused until then).
func (r *Run) SetRules(rules []Rule) {
	r.rulesMu.Lock()
	defer r.rulesMu.Unlock()
	r.Rules = rules
}

// rules is the run's allowlist now.
func (r *Run) rules() []Rule {
	r.rulesMu.RLock()
	defer r.rulesMu.RUnlock()
	return r.Rules
}

// Serve serves the run's egress connections accepted on ln until ctx ends
// or ln is closed, then closes ln and every open connection and returns
// once all connection goroutines have ended. ca signs the leaves of
// intercepted hosts; it may be nil when run.Bindings is empty. Serve
// returns nil when ctx ended or ln was closed, or the Accept error that
// stopped it.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener, run *Run, ca *CA) error {
	if run == nil || run.ID == "" {
		return job.Errorf(job.CodeInvalidRequest, "egress: a run with an id is required")
	}
	if err := checkBindings(run.Bindings); err != nil {
		return err
	}
	if len(run.Bindings) > 0 && ca == nil {
		return job.Errorf(job.CodeInvalidRequest, "egress: run %s binds secrets but has no CA", run.ID)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &session{g: g, run: run, ca: ca, ctx: ctx, conns: map[net.Conn]struct{}{}, slots: make(chan struct{}, g.maxConns),
		names: newNameSet(g.maxNames), refusals: newRefusals(g.refusalsPerKey, g.maxRefusals, g.summaryInterval)}
	stopClose := context.AfterFunc(ctx, func() { ln.Close(); s.closeAll() })
	defer stopClose()
	stopSummaries := s.summarizeEvery(g.summaryInterval)

	var err error
	backoff := time.Duration(0)
	for {
		var c net.Conn
		c, err = ln.Accept()
		if err != nil {
			if !temporary(err) || ctx.Err() != nil {
				break
			}
			// Out of descriptors or the like: wait and try again, as
			// net/http does, rather than drop the run's connections.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			g.log.Warn("egress accept failed; retrying", logKeyRun, run.ID, logKeyError, err.Error())
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			continue
		}
		backoff = 0
		start := time.Now()
		select {
		case s.slots <- struct{}{}:
		default:
			s.turnAway(c, start)
			continue
		}
		if !s.track(c) {
			c.Close()
			<-s.slots
			break
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			defer s.untrack(c)
			s.serveConn(c, start)
		}()
	}
	ln.Close()
	s.closeAll()
	s.wg.Wait()
	stopSummaries()
	s.finishRefusals()
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return job.Wrap(job.CodeInternal, err, "egress listener")
}

// temporary reports whether an Accept error may pass (EMFILE, ENFILE).
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// session is one Serve call: a run's connections.
type session struct {
	g   *Gateway
	run *Run
	ca  *CA
	ctx context.Context // Serve's, ended when Serve stops

	wg    sync.WaitGroup
	slots chan struct{}

	names    *nameSet  // distinct names looked up (Config.MaxNames)
	refusals *refusals // what of the refusals is recorded and logged

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// track registers a connection (client or upstream) to be closed when the
// session stops; false when it already has.
func (s *session) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *session) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *session) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
}

// turnAway answers a connection over the run's cap with 503 without
// starting a goroutine: a fresh socket's send buffer takes the short
// answer at once, and the deadline bounds the rare case it does not.
func (s *session) turnAway(c net.Conn, start time.Time) {
	rec := s.newRecord(start)
	rec.refuse(refuse(ReasonTooMany, "connection cap reached"))
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	writeRefusal(c, "", 0, rec.refusal)
	c.Close()
	s.emit(rec)
}
