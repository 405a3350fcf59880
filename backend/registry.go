package backend

import (
	"fmt"
	"sort"
	"sync"
)

var (
	mu       sync.RWMutex
	registry = map[string]Backend{}
)

// Register adds b under b.Kind(). It panics on an empty or duplicate kind,
// which is a programming error caught at init.
func Register(b Backend) {
	mu.Lock()
	defer mu.Unlock()
	kind := b.Kind()
	if kind == "" {
		panic("backend: Register with empty kind")
	}
	if _, dup := registry[kind]; dup {
		panic(fmt.Sprintf("backend: Register called twice for %q", kind))
	}
	registry[kind] = b
}

// Lookup returns the backend registered under kind.
func Lookup(kind string) (Backend, bool) {
	mu.RLock()
	defer mu.RUnlock()
	b, ok := registry[kind]
	return b, ok
}

// Kinds lists the registered kinds in sorted order.
func Kinds() []string {
	mu.RLock()
	defer mu.RUnlock()
	kinds := make([]string, 0, len(registry))
	for k := range registry {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}
