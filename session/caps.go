package session

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// The operator's caps on creates (Config.MaxSandboxes, MaxPerOwner,
// MemoryOvercommit, CPUOvercommit): a create beyond one is
// session.limit_reached with details naming the cap, its limit and what
// is in use, before anything of the sandbox is made. Live sandboxes and
// creates in progress count alike.

// The caps, as details.cap names them.
const (
	CapSandboxes         = "sandboxes"
	CapSandboxesPerToken = "sandboxes_per_token"
	CapMemory            = "memory_mb"
	CapCPU               = "cpu_count"
)

// claim is what one sandbox holds of the caps: its owner (the token
// that created it) and its memory and CPU limits. It never changes.
type claim struct {
	owner string
	memMB int64
	cpus  int64
}

// ownerKey is the context key of a create's owner.
type ownerKey struct{}

// WithOwner returns ctx carrying the identity of the caller (the door's
// token: its name, or a digest of an unnamed one) that Create counts a
// sandbox against for Config.MaxPerOwner. A create without one counts
// as the owner "" (every caller of a server without tokens).
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// ownerOf is ctx's owner (WithOwner), or "".
func ownerOf(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// claimOf is what sandbox rec, created for ctx's caller, claims.
func claimOf(ctx context.Context, rec Record) *claim {
	return &claim{owner: ownerOf(ctx), memMB: rec.Limits.MemoryMB, cpus: rec.Limits.CPUCount}
}

// reserve counts c against the caps, or answers session.limit_reached
// naming the first cap it would pass.
func (s *Service) reserve(c *claim) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserveLocked(c)
}

// reserveLocked is reserve with mu held. The warm pools' sandboxes
// count against MaxSandboxes only (pool.go): they are no caller's.
func (s *Service) reserveLocked(c *claim) error {
	count := int64(s.pooledCount())
	var owned, mem, cpus int64
	add := func(o *claim) {
		count++
		if o == nil {
			return
		}
		mem += o.memMB
		cpus += o.cpus
		if o.owner == c.owner {
			owned++
		}
	}
	for _, h := range s.live {
		add(h.claim)
	}
	for o := range s.pending {
		add(o)
	}
	limit := func(cap string, lim, inUse, asked int64, msg string) *job.Error {
		return job.Errorf(job.CodeSessionLimit, "%s", msg).With("cap", cap).With("limit", lim).With("in_use", inUse).With("requested", asked)
	}
	if lim := int64(s.cfg.MaxSandboxes); count >= lim {
		return limit(CapSandboxes, lim, count, 1, "the server keeps at most "+strconv.FormatInt(lim, 10)+" sandboxes; delete one first").With("max", lim)
	}
	if lim := int64(s.cfg.MaxPerOwner); lim > 0 && owned >= lim {
		return limit(CapSandboxesPerToken, lim, owned, 1, "this token keeps at most "+strconv.FormatInt(lim, 10)+" sandboxes; delete one first")
	}
	if r := s.cfg.MemoryOvercommit; r > 0 {
		if lim := int64(float64(s.cfg.HostMemoryMB) * r); mem+c.memMB > lim {
			return limit(CapMemory, lim, mem, c.memMB, "the live sandboxes' memory_mb would pass the host's memory times --sandbox-memory-overcommit")
		}
	}
	if r := s.cfg.CPUOvercommit; r > 0 {
		if lim := int64(float64(s.cfg.HostCPUs) * r); cpus+c.cpus > lim {
			return limit(CapCPU, lim, cpus, c.cpus, "the live sandboxes' cpu_count would pass the host's CPUs times --sandbox-cpu-overcommit")
		}
	}
	s.pending[c] = true
	return nil
}

// release ends c's create: from then it counts only as its live
// sandbox, if the create made one.
func (s *Service) release(c *claim) {
	s.mu.Lock()
	delete(s.pending, c)
	s.mu.Unlock()
}

// hostMemoryMB is the host's memory (MemTotal of /proc/meminfo), or 0.
func hostMemoryMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb / 1024
		}
	}
	return 0
}

// hostCPUs is the CPUs this process may use.
func hostCPUs() int { return runtime.NumCPU() }
