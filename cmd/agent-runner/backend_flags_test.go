package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// testBackend stands in for an isolating backend that cannot start: its
// probe fails while failures > 0, counting down once per probe.
type testBackend struct {
	kind     string
	failures atomic.Int32
}

func (b *testBackend) Kind() string { return b.kind }
func (b *testBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true}
}

func (b *testBackend) Available(context.Context) error {
	if b.failures.Add(-1) >= 0 {
		return errors.New("cannot create a user namespace (test)")
	}
	return nil
}

func (b *testBackend) Run(context.Context, backend.Spec) (backend.Outcome, error) {
	return backend.Outcome{}, errors.New("not for running")
}

var (
	sandboxDown  = &testBackend{kind: "cmd_test_sandbox_down"}
	sandboxFlaky = &testBackend{kind: "cmd_test_sandbox_flaky"}
)

func init() { sandboxDown.failures.Store(1 << 30) }

// testBackends is the Set a door would build, with the two fakes added.
func testBackends() backend.Set {
	s := backend.Defaults()
	s[sandboxDown.kind] = sandboxDown
	s[sandboxFlaky.kind] = sandboxFlaky
	return s
}

// TestDoorBackend is the choice serve, worker and mcp make at start.
func TestDoorBackend(t *testing.T) {
	tests := []struct {
		name        string
		kind        string
		unsafeLocal bool
		want        string
		usage       bool     // a usageError (exit 2)
		code        job.Code // else this coded error
		mentions    []string
	}{
		{"isolating backend that cannot start", sandboxDown.kind, false, "", false, job.CodeBackendUnavail,
			[]string{"cannot create a user namespace (test)", "--default-backend local_process --unsafe-local-process"}},
		{"the override does not hide an unavailable default", sandboxDown.kind, true, "", false, job.CodeBackendUnavail, nil},
		{"local_process without the flag", "local_process", false, "", true, "", []string{"--unsafe-local-process", "without isolation"}},
		{"local-process spelling without the flag", "local-process", false, "", true, "", []string{"--unsafe-local-process"}},
		{"local_process with the flag", "local_process", true, "local_process", false, "", nil},
		{"unknown kind", "nope", false, "", true, "", []string{"unknown backend"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := doorBackend(context.Background(), testBackends(), "default-backend", tt.kind, tt.unsafeLocal)
			if got != tt.want {
				t.Errorf("doorBackend(%q, %v) = %q, want %q", tt.kind, tt.unsafeLocal, got, tt.want)
			}
			var u usageError
			if gotUsage := errors.As(err, &u); gotUsage != tt.usage {
				t.Errorf("doorBackend(%q, %v) error = %v, want usage error %v", tt.kind, tt.unsafeLocal, err, tt.usage)
			}
			if !tt.usage && job.CodeOf(err) != tt.code {
				t.Errorf("doorBackend(%q, %v) code = %q (%v), want %q", tt.kind, tt.unsafeLocal, job.CodeOf(err), err, tt.code)
			}
			for _, m := range tt.mentions {
				if err == nil || !strings.Contains(err.Error(), m) {
					t.Errorf("doorBackend(%q, %v) error = %v, want it to mention %q", tt.kind, tt.unsafeLocal, err, m)
				}
			}
		})
	}
}

// TestDoorBackendProbesEveryTime: a failed start-up probe is not
// remembered; the next start probes again.
func TestDoorBackendProbesEveryTime(t *testing.T) {
	sandboxFlaky.failures.Store(1)
	if _, err := doorBackend(context.Background(), testBackends(), "default-backend", sandboxFlaky.kind, false); job.CodeOf(err) != job.CodeBackendUnavail {
		t.Fatalf("first probe = %v, want %s", err, job.CodeBackendUnavail)
	}
	got, err := doorBackend(context.Background(), testBackends(), "default-backend", sandboxFlaky.kind, false)
	if err != nil || got != sandboxFlaky.kind {
		t.Errorf("second probe = %q, %v, want %q", got, err, sandboxFlaky.kind)
	}
}

func TestEnabledBackends(t *testing.T) {
	for _, unsafeLocal := range []bool{false, true} {
		got := enabledBackends(testBackends(), unsafeLocal).Kinds()
		if slices.Contains(got, localProcess) != unsafeLocal {
			t.Errorf("enabledBackends(%v) = %v, want local_process only with the flag", unsafeLocal, got)
		}
		for _, kind := range []string{isolatingDefault, sandboxDown.kind} {
			if !slices.Contains(got, kind) {
				t.Errorf("enabledBackends(%v) = %v, want %s (isolating)", unsafeLocal, got, kind)
			}
		}
	}
}

// TestTaskBackendFor (taskFlags.taskBackend): tasks run on --task-backend, held to the same rule,
// or on serve's default backend; never on a fallback.
func TestTaskBackendFor(t *testing.T) {
	tests := []struct {
		name        string
		flag        string
		unsafeLocal bool
		want        string
		code        job.Code
		usage       bool
	}{
		{"default: serve's backend", "", false, isolatingDefault, "", false},
		{"task backend that cannot start", sandboxDown.kind, false, "", job.CodeBackendUnavail, false},
		{"local_process without the flag", "local_process", false, "", "", true},
		{"local_process with the flag", "local_process", true, "local_process", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := taskFlags{backend: tt.flag}
			b, err := f.taskBackend(context.Background(), taskDeps{DefaultBackend: isolatingDefault, Backends: testBackends(), UnsafeLocalProcess: tt.unsafeLocal})
			got := ""
			if b != nil {
				got = b.Kind()
			}
			if got != tt.want {
				t.Errorf("taskBackendFor(%q) = %q (%v), want %q", tt.flag, got, err, tt.want)
			}
			var u usageError
			if errors.As(err, &u) != tt.usage || (!tt.usage && job.CodeOf(err) != tt.code) {
				t.Errorf("taskBackendFor(%q) error = %v, want usage %v code %q", tt.flag, err, tt.usage, tt.code)
			}
		})
	}
}

// TestEnabledBackendsLeaveOutPlaceholders: firecracker, which runs nothing
// in this build, was listed as enabled.
func TestEnabledBackendsLeaveOutPlaceholders(t *testing.T) {
	set, err := backend.NewSet(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := enabledBackends(set, true).Kinds(); slices.Contains(got, "firecracker") {
		t.Errorf("enabledBackends = %v, want no firecracker (a placeholder)", got)
	}
}
