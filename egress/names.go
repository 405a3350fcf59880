package egress

import (
	"fmt"
	"sync"
)

// nameSet is the distinct names a run has had looked up on the host's
// resolver, up to Config.MaxNames. Each lookup of a new name reaches the
// authoritative servers of its domain, so under a wildcard rule the names
// themselves are a channel out (data in DNS labels); the cap bounds it.
// Names looked up once may be looked up again: that carries nothing new.
type nameSet struct {
	max   int
	mu    sync.Mutex
	names map[string]struct{}
}

func newNameSet(max int) *nameSet {
	return &nameSet{max: max, names: map[string]struct{}{}}
}

// admit adds host to the set, or refuses it (too_many_names) when it is
// new and the set is full. Failed lookups count: the query left anyway.
func (n *nameSet) admit(host string) *refusal {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.names[host]; ok {
		return nil
	}
	if len(n.names) >= n.max {
		return refuse(ReasonTooManyNames, fmt.Sprintf("the run already had %d distinct names looked up (the gateway's MaxNames); a new name is not resolved", n.max))
	}
	n.names[host] = struct{}{}
	return nil
}
