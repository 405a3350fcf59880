package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// How a sandbox was started (Record.Start).
const (
	StartWarm = "warm" // claimed from its template's pool
	StartCold = "cold" // created for its request
)

// Why a create was cold (Record.StartReason): no template, a template
// without a pool, an empty pool, a request whose shape the pool's
// sandboxes do not have (shape.backend, shape.limits, shape.network,
// shape.policy: the programs the whole sandbox denies), secrets (a
// pooled bridge holds no bindings), or a pooled sandbox that could not
// be claimed (it had died).
const (
	ColdNoTemplate   = "no_template"
	ColdNoPool       = "no_pool"
	ColdPoolEmpty    = "pool_empty"
	ColdShapeBackend = "shape.backend"
	ColdShapeLimits  = "shape.limits"
	ColdShapeNetwork = "shape.network"
	ColdShapePolicy  = "shape.policy"
	ColdClaimFailed  = "claim_failed"
	ColdSecrets      = "secrets"
)

// poolCheck is how often the pooled sandboxes are checked alive (a dead
// one is replaced).
const poolCheck = 5 * time.Second

// pools are the templates' warm pools. Their contents and counts are
// guarded by the service's mu.
type pools struct {
	dir    string
	byName map[string]*pool
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// lastClaim is when a create last claimed a pooled sandbox: the
	// refill waits Config.PoolRefillDelay after it.
	lastClaim time.Time
	// lastErr is why the last pooled sandbox could not be created (nil
	// once one was).
	lastErr error
}

// pool is one template's: its sandboxes' shape, those ready to claim,
// and how many are being created.
type pool struct {
	name    string
	size    int
	spec    runner.SandboxSpec
	ready   []*pooled
	filling int
}

// pooled is a sandbox created for a pool, frozen until claimed: its
// directory (its workspace inside, empty), the run service's sandbox and
// its egress bridge (an allowlist template's, without rules until
// claimed).
type pooled struct {
	dir    string
	sb     *runner.Sandbox
	bridge *poolBridge
}

// startPools builds the templates' pools and starts filling them in the
// background; Close stops it. Pooled sandboxes of an earlier process
// died with it: its pool directory is removed first.
func (s *Service) startPools() error {
	s.pools = &pools{byName: map[string]*pool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	for name, t := range s.cfg.Templates {
		if t.Pool == 0 {
			continue
		}
		_, spec, _, err := s.admit(t.apply(CreateRequest{Template: name}))
		if err != nil {
			return err
		}
		s.pools.byName[name] = &pool{name: name, size: t.Pool, spec: spec}
	}
	if len(s.pools.byName) == 0 {
		close(s.pools.done)
		return nil
	}
	dir := s.cfg.PoolDir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(filepath.Clean(s.cfg.Records.Path("x"))), "..", "session-pool")
		dir = filepath.Clean(dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot clear the sandbox pool directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot create the sandbox pool directory")
	}
	s.pools.dir = dir
	ctx, cancel := context.WithCancel(context.Background())
	s.pools.cancel = cancel
	go s.fillPools(ctx)
	return nil
}

// closePools stops the filling and deletes every pooled sandbox.
func (s *Service) closePools() {
	if s.pools.cancel == nil {
		return
	}
	s.pools.cancel()
	<-s.pools.done
	s.mu.Lock()
	var all []*pooled
	for _, p := range s.pools.byName {
		all = append(all, p.ready...)
		p.ready = nil
	}
	s.mu.Unlock()
	for _, it := range all {
		s.discard(it)
	}
	os.RemoveAll(s.pools.dir)
}

// pooledCount is how many sandboxes the pools hold or are creating
// (counted against MaxSandboxes). The caller holds mu.
func (s *Service) pooledCount() int {
	if s.pools == nil {
		return 0
	}
	n := 0
	for _, p := range s.pools.byName {
		n += len(p.ready) + p.filling
	}
	return n
}

// wakePools asks the filler to look at the pools now.
func (s *Service) wakePools() {
	select {
	case s.pools.wake <- struct{}{}:
	default:
	}
}

// fillPools keeps every pool full (within MaxSandboxes) until ctx ends,
// and checks the pooled sandboxes alive every poolCheck.
func (s *Service) fillPools(ctx context.Context) {
	defer close(s.pools.done)
	t := time.NewTicker(poolCheck)
	defer t.Stop()
	for {
		var later <-chan time.Time
		if d := s.refillIn(); d > 0 {
			later = time.After(d)
		} else {
			s.refill(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.pools.wake:
		case <-later:
		case <-t.C:
			s.checkPooled(ctx)
		}
	}
}

// refillIn is how long the refill waits still: PoolRefillDelay after
// the last claim.
func (s *Service) refillIn() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools.lastClaim.IsZero() {
		return 0
	}
	return max(0, time.Until(s.pools.lastClaim.Add(s.cfg.PoolRefillDelay)))
}

// WaitPools waits until every pool is full (or the pools fill
// MaxSandboxes), a pooled sandbox cannot be created (that error), or ctx
// ends (its error). serve waits for it before it answers, so its first
// creates are warm.
func (s *Service) WaitPools(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if full, err := s.poolsFull(); full || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// poolsFull reports whether every pool holds its size ready, or the
// sandboxes fill MaxSandboxes, and the last creation's error.
func (s *Service) poolsFull() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.live)+len(s.pending)+s.pooledCount() >= s.cfg.MaxSandboxes {
		return true, nil
	}
	for _, p := range s.pools.byName {
		if len(p.ready) < p.size {
			return false, s.pools.lastErr
		}
	}
	return true, nil
}

// refill creates sandboxes for the pools that lack some, one at a time,
// until each is full, the total is reached or a creation fails (tried
// again at the next wake or check).
func (s *Service) refill(ctx context.Context) {
	names := make([]string, 0, len(s.pools.byName))
	for name := range s.pools.byName {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.pools.byName[name]
		for ctx.Err() == nil && s.refillIn() == 0 {
			s.mu.Lock()
			if len(p.ready)+p.filling >= p.size || len(s.live)+len(s.pending)+s.pooledCount() >= s.cfg.MaxSandboxes {
				s.mu.Unlock()
				break
			}
			p.filling++
			s.mu.Unlock()
			it, err := s.newPooled(ctx, p)
			s.mu.Lock()
			p.filling--
			if err == nil && ctx.Err() == nil {
				p.ready = append(p.ready, it)
			}
			s.pools.lastErr = err
			s.mu.Unlock()
			if err != nil {
				s.cfg.Logger.Warn("cannot create a pooled sandbox", "template", p.name, "error", err)
				break
			}
			if ctx.Err() != nil {
				s.discard(it)
			}
		}
	}
}

// newPooled creates one sandbox of p's shape over an empty workspace,
// with its egress bridge (refusing everything until claimed) where p's
// network is an allowlist, and freezes it.
func (s *Service) newPooled(ctx context.Context, p *pool) (*pooled, error) {
	var b [8]byte
	rand.Read(b[:])
	id := "pool_" + hex.EncodeToString(b[:])
	it := &pooled{dir: filepath.Join(s.pools.dir, id)}
	spec := p.spec
	spec.ID, spec.Workspace = id, filepath.Join(it.dir, workspaceDir)
	if err := os.Mkdir(it.dir, 0o700); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create a pooled sandbox's directory")
	}
	if err := os.Mkdir(spec.Workspace, 0o755); err != nil {
		os.RemoveAll(it.dir)
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create a pooled sandbox's workspace")
	}
	if spec.Network == job.NetworkAllowlist {
		pb, eg, err := s.openPoolBridge(id)
		if err != nil {
			os.RemoveAll(it.dir)
			return nil, err
		}
		it.bridge, spec.Egress = pb, eg
	}
	sb, err := s.cfg.Runner.OpenSandbox(ctx, spec)
	if err != nil {
		it.bridge.close(s)
		os.RemoveAll(it.dir)
		return nil, err
	}
	it.sb = sb
	if err := sb.Pause(ctx); err != nil {
		s.discard(it)
		return nil, err
	}
	return it, nil
}

// discard deletes a pooled sandbox that will not be claimed (or whose
// claim failed) and what it holds.
func (s *Service) discard(it *pooled) {
	if err := it.sb.Close(); err != nil {
		s.cfg.Logger.Warn("cannot delete a pooled sandbox", "id", it.sb.ID(), "error", err)
	}
	it.bridge.close(s)
	s.removeDir(it.dir)
}

// removeDir removes a pooled sandbox's directory.
func (s *Service) removeDir(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		s.cfg.Logger.Warn("cannot remove a pooled sandbox's directory", "dir", dir, "error", err)
	}
}

// checkPooled checks every pooled sandbox alive (freezing a frozen one
// again fails once its init is gone) and discards a dead one; the next
// refill replaces it. Each is out of its pool while it is checked, so no
// create claims it then.
func (s *Service) checkPooled(ctx context.Context) {
	for _, p := range s.pools.byName {
		s.mu.Lock()
		n := len(p.ready)
		s.mu.Unlock()
		for range n {
			s.mu.Lock()
			if len(p.ready) == 0 {
				s.mu.Unlock()
				break
			}
			it := p.ready[0]
			p.ready = p.ready[1:]
			p.filling++
			s.mu.Unlock()
			err := it.sb.Pause(ctx)
			s.mu.Lock()
			p.filling--
			if err == nil {
				p.ready = append(p.ready, it)
			}
			s.mu.Unlock()
			if err != nil {
				s.cfg.Logger.Warn("a pooled sandbox died; replacing it", "template", p.name, "id", it.sb.ID(), "error", err)
				s.discard(it)
				s.wakePools()
			}
		}
	}
}

// take claims a ready sandbox of template name's pool for create req
// (its template applied) whose sandbox is spec, holding c against the
// caps (release ends that) as reserve would, or says why the create is
// cold (then nothing is held). A create the caps refuse is their error.
func (s *Service) take(name string, req CreateRequest, spec runner.SandboxSpec, c *claim) (*pooled, string, error) {
	if name == "" {
		return nil, ColdNoTemplate, nil
	}
	p := s.pools.byName[name]
	if p == nil {
		return nil, ColdNoPool, nil
	}
	if len(req.Secrets) > 0 {
		return nil, ColdSecrets, nil
	}
	if why := mismatch(p.spec, spec); why != "" {
		return nil, why, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p.ready) == 0 {
		return nil, ColdPoolEmpty, nil
	}
	it := p.ready[0]
	p.ready = p.ready[1:]
	if err := s.reserveLocked(c); err != nil {
		p.ready = append([]*pooled{it}, p.ready...)
		return nil, "", err
	}
	s.pools.lastClaim = time.Now()
	s.wakePools()
	return it, "", nil
}

// giveBack returns an unclaimed sandbox take handed out (its create
// ended before the claim) to template name's pool.
func (s *Service) giveBack(name string, it *pooled) {
	s.mu.Lock()
	p := s.pools.byName[name]
	p.ready = append(p.ready, it)
	s.mu.Unlock()
}

// mismatch says which part of a create's sandbox differs from the
// pool's, or "": the backend, the limits, the network mode, the programs
// the whole sandbox denies. The rest is bound at claim (the workspace,
// the allowed hosts, env, metadata, policy decided per exec).
func mismatch(pool, req runner.SandboxSpec) string {
	switch {
	case pool.Backend.Kind() != req.Backend.Kind():
		return ColdShapeBackend
	case pool.Limits != req.Limits:
		return ColdShapeLimits
	case pool.Network != req.Network:
		return ColdShapeNetwork
	case !slices.Equal(pool.DeniedPrograms, req.DeniedPrograms):
		return ColdShapePolicy
	}
	return ""
}
