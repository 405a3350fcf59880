package backend_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// configured is a fake backend that keeps the Config it was built with.
type configured struct {
	kind      string
	cfg       backend.Config
	isolating bool
}

func (b *configured) Kind() string { return b.kind }
func (b *configured) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: b.isolating}
}
func (b *configured) Available(context.Context) error { return nil }
func (b *configured) Run(context.Context, backend.Spec) (backend.Outcome, error) {
	return backend.Outcome{}, errors.New("not for running")
}

// built counts the instances the registry_test factories made.
var built atomic.Int32

func init() {
	backend.RegisterFactory("registry_test", func(cfg backend.Config) (backend.Backend, error) {
		built.Add(1)
		if slices.Contains(cfg.ReadOnly, "/refused") {
			return nil, job.Errorf(job.CodeBackendSetupFailed, "--sandbox-ro /refused: refused")
		}
		return &configured{kind: "registry_test", cfg: cfg, isolating: true}, nil
	})
	backend.RegisterFactory("registry_test_local", func(cfg backend.Config) (backend.Backend, error) {
		return &configured{kind: "registry_test_local", cfg: cfg}, nil
	})
	backend.RegisterFactory("registry_test_misnamed", func(cfg backend.Config) (backend.Backend, error) {
		if slices.Contains(cfg.Path, "/misnamed") {
			return &configured{kind: "something_else"}, nil
		}
		return &configured{kind: "registry_test_misnamed", isolating: true}, nil
	})
}

// TestNewGivesEachInstanceItsConfig: two instances of one kind, built
// with different configurations, each keep their own.
func TestNewGivesEachInstanceItsConfig(t *testing.T) {
	wide := backend.Config{ReadOnly: []string{"/opt/tools"}, Path: []string{"/opt/tools/bin"}, Masked: []string{"/opt/tools/key"}, RequireLimits: true}
	a, err := backend.New("registry_test", wide)
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New("registry_test", backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("New returned one instance twice, want a fresh one per call")
	}
	if diff := cmp.Diff(wide, a.(*configured).cfg); diff != "" {
		t.Errorf("first instance's Config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(backend.Config{}, b.(*configured).cfg); diff != "" {
		t.Errorf("second instance's Config (-want +got):\n%s", diff)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name, kind string
		cfg        backend.Config
		code       job.Code
		mentions   string
	}{
		{"unknown kind", "no_such_backend", backend.Config{}, job.CodeBackendUnavail, "not built into this binary"},
		{"configuration refused", "registry_test", backend.Config{ReadOnly: []string{"/refused"}}, job.CodeBackendSetupFailed, "--sandbox-ro /refused"},
		{"factory builds another kind", "registry_test_misnamed", backend.Config{Path: []string{"/misnamed"}}, job.CodeBackendSetupFailed, "something_else"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := backend.New(tt.kind, tt.cfg)
			if b != nil || job.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("New(%q) = %v, %v, want a %s error mentioning %q", tt.kind, b, err, tt.code, tt.mentions)
			}
		})
	}
}

func TestRegisterFactoryPanics(t *testing.T) {
	f := func(backend.Config) (backend.Backend, error) { return nil, nil }
	tests := []struct {
		name string
		kind string
		f    backend.Factory
	}{
		{"empty kind", "", f},
		{"nil factory", "registry_test_nil", nil},
		{"duplicate kind", "registry_test", f},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterFactory(%q) did not panic", tt.kind)
				}
			}()
			backend.RegisterFactory(tt.kind, tt.f)
		})
	}
}

// TestLookupIsOneDefaultInstance: Lookup builds the zero-Config instance
// once and returns it on every call, so what it learns is kept.
func TestLookupIsOneDefaultInstance(t *testing.T) {
	first, ok := backend.Lookup("registry_test")
	if !ok {
		t.Fatal("Lookup(registry_test) = false")
	}
	before := built.Load()
	again, ok := backend.Lookup("registry_test")
	if !ok || again != first || built.Load() != before {
		t.Errorf("second Lookup = %p %v (built %d more), want the first instance %p", again, ok, built.Load()-before, first)
	}
	if diff := cmp.Diff(backend.Config{}, first.(*configured).cfg); diff != "" {
		t.Errorf("Lookup's instance Config (-want +got):\n%s", diff)
	}
	if _, ok := backend.Lookup("no_such_backend"); ok {
		t.Error("Lookup(no_such_backend) = true")
	}
}

// TestSet: NewSet builds every registered kind with one Config (and
// fails with the first factory that refuses it), Filter keeps what the
// caller asks of the capabilities, and a Set logs as its kinds.
func TestSet(t *testing.T) {
	cfg := backend.Config{Path: []string{"/usr/bin"}}
	s, err := backend.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Kinds(), backend.Kinds(); !cmp.Equal(got, want) {
		t.Errorf("NewSet kinds = %v, want every registered kind %v", got, want)
	}
	if diff := cmp.Diff(cfg, s["registry_test"].(*configured).cfg); diff != "" {
		t.Errorf("NewSet instance Config (-want +got):\n%s", diff)
	}
	isolating := s.Filter(func(b backend.Backend) bool { return b.Capabilities().Isolating })
	if got, want := isolating.Kinds(), []string{"registry_test", "registry_test_misnamed"}; !cmp.Equal(got, want) {
		t.Errorf("Filter(Isolating) = %v, want %v", got, want)
	}
	if got, want := isolating.LogValue().String(), "[registry_test registry_test_misnamed]"; got != want {
		t.Errorf("LogValue() = %q, want %q", got, want)
	}
	if _, err := backend.NewSet(backend.Config{ReadOnly: []string{"/refused"}}); job.CodeOf(err) != job.CodeBackendSetupFailed {
		t.Errorf("NewSet with a refused Config = %v, want %s", err, job.CodeBackendSetupFailed)
	}
	d := backend.Defaults()
	if got, want := d.Kinds(), backend.Kinds(); !cmp.Equal(got, want) {
		t.Errorf("Defaults() kinds = %v, want %v", got, want)
	}
	if b, _ := backend.Lookup("registry_test"); d["registry_test"] != b {
		t.Errorf("Defaults()[registry_test] is not Lookup's instance")
	}
}
