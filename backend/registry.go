package backend

import (
	"fmt"
	"sort"
	"sync"

	"github.com/agent-runner/agent-runner/job"
)

// Config is the operator's configuration of a backend, the argument of
// its Factory. One Config builds every kind a process runs (cmd builds it
// from the flags); each backend honours the fields that apply to it. A
// backend that is not Isolating runs on the whole host: it has no view to
// widen or mask and ignores ReadOnly, Path and Masked.
type Config struct {
	// ReadOnly are host directories every sandbox sees read-only at the
	// same path, beside the backend's own toolchain (ReadOnlyFlag).
	ReadOnly []string
	// Path is the sandbox's PATH, on which bare program names resolve;
	// empty takes the backend's default (PathFlag).
	Path []string
	// Masked are host paths hidden inside the view, besides the secrets
	// the backend hides on its own.
	Masked []string
	// RequireLimits refuses to run (backend.unavailable) where the
	// memory, CPU and process limits cannot be applied, instead of
	// running with them reported not enforced.
	RequireLimits bool
	// AllowUnenforcedLimits is the operator's consent (the doors'
	// --allow-unenforced-limits) to run a job that asks for a memory, CPU
	// or process limit the backend cannot apply, reported not_enforced.
	// Without it an isolating backend refuses such a job
	// (backend.unavailable) before any of its code runs: limits fail
	// closed.
	AllowUnenforcedLimits bool
}

// Factory builds a backend from its configuration. It checks cfg (a
// read-only directory that does not exist is an error) and returns an
// instance that owns what it was given: two instances of one kind in one
// process never share a view.
type Factory func(cfg Config) (Backend, error)

var (
	mu        sync.Mutex
	factories = map[string]Factory{}
	// defaults are the instances Lookup built, one per kind.
	defaults = map[string]Backend{}
)

// RegisterFactory adds f under kind; backend packages call it from
// init(). It panics on an empty or duplicate kind or a nil f, which is a
// programming error caught at init.
func RegisterFactory(kind string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if kind == "" {
		panic("backend: RegisterFactory with empty kind")
	}
	if f == nil {
		panic(fmt.Sprintf("backend: RegisterFactory(%q) with a nil factory", kind))
	}
	if _, dup := factories[kind]; dup {
		panic(fmt.Sprintf("backend: RegisterFactory called twice for %q", kind))
	}
	factories[kind] = f
}

// Register adds b under b.Kind() as a factory that returns b whatever
// the configuration: for a backend with nothing to configure, such as a
// test's fake.
func Register(b Backend) {
	RegisterFactory(b.Kind(), func(Config) (Backend, error) { return b, nil })
}

// New builds a backend of kind with cfg. An unknown kind is
// backend.unavailable; a configuration the backend refuses is its
// factory's error.
func New(kind string, cfg Config) (Backend, error) {
	mu.Lock()
	f, ok := factories[kind]
	mu.Unlock()
	if !ok {
		return nil, job.Errorf(job.CodeBackendUnavail, "backend %s is not built into this binary (built in: %v)", kind, Kinds()).
			With("backend", kind)
	}
	b, err := f(cfg)
	if err != nil {
		return nil, err
	}
	if b.Kind() != kind {
		return nil, job.Errorf(job.CodeBackendSetupFailed, "the factory registered as %s built a %s backend", kind, b.Kind()).
			With("backend", kind)
	}
	return b, nil
}

// Lookup returns the instance of kind built with the zero Config (no
// operator view), the same one on every call, so what it learns (a
// probe's success) is kept. It is for callers the operator does not
// configure; a door builds a Set from its flags instead. A kind whose
// factory refuses the zero Config is reported missing.
func Lookup(kind string) (Backend, bool) {
	mu.Lock()
	if b, ok := defaults[kind]; ok {
		mu.Unlock()
		return b, true
	}
	mu.Unlock()
	b, err := New(kind, Config{})
	if err != nil {
		return nil, false
	}
	mu.Lock()
	defer mu.Unlock()
	if first, ok := defaults[kind]; ok {
		return first, true
	}
	defaults[kind] = b
	return b, true
}

// Known reports whether a factory is registered under kind.
func Known(kind string) bool {
	mu.Lock()
	defer mu.Unlock()
	_, ok := factories[kind]
	return ok
}

// Kinds lists the registered kinds in sorted order.
func Kinds() []string {
	mu.Lock()
	defer mu.Unlock()
	kinds := make([]string, 0, len(factories))
	for k := range factories {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}
