package mcpserver_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/door/mcpserver"
	"github.com/agent-runner/agent-runner/job"
)

// probeBackend stands in for an isolating backend that cannot start: its
// probe fails while failures > 0 (counting down once per probe); once it
// answers, Run reports a clean exit without running anything.
type probeBackend struct {
	kind     string
	failures atomic.Int32
}

func (b *probeBackend) Kind() string { return b.kind }
func (b *probeBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true}
}

func (b *probeBackend) Available(context.Context) error {
	if b.failures.Add(-1) >= 0 {
		return errors.New("cannot create a user namespace (test)")
	}
	return nil
}

func (b *probeBackend) Run(context.Context, backend.Spec) (backend.Outcome, error) {
	zero := 0
	return backend.Outcome{ExitCode: &zero, Reason: job.ReasonExit}, nil
}

var (
	sandboxDown  = &probeBackend{kind: "mcp_test_sandbox_down"}
	sandboxFlaky = &probeBackend{kind: "mcp_test_sandbox_flaky"}
)

func init() {
	sandboxDown.failures.Store(1 << 30)
	backend.Register(sandboxDown)
	backend.Register(sandboxFlaky)
}

func runArgs(ws string, argv ...string) map[string]any {
	return map[string]any{"workspace_path": ws, "argv": argv, "policy": map[string]any{"allowed_commands": []any{argv[0]}}}
}

// TestRunFailsClosed: when the operator's backend cannot start, sandbox.run
// ends backend_unavailable with the probe's reason; nothing runs on
// local_process.
func TestRunFailsClosed(t *testing.T) {
	f := connectTo(t, mcpserver.Config{Backend: sandboxDown.kind})
	out, isErr, text := call(t, f.cs, "sandbox.run", runArgs(f.ws, "true"))
	if isErr {
		t.Fatalf("tool error %s, want a backend_unavailable result", text)
	}
	res := out["result"].(map[string]any)
	if got, want := out["status"], string(job.StatusBackendUnavailable); got != want {
		t.Fatalf("status = %v, want %s (%v)", got, want, res["error"])
	}
	e := res["error"].(map[string]any)
	if got, want := e["code"], string(job.CodeBackendUnavail); got != want {
		t.Errorf("error.code = %v, want %s", got, want)
	}
	if got, want := e["details"].(map[string]any)["reason"], "cannot create a user namespace (test)"; got != want {
		t.Errorf("error.details.reason = %v, want %q", got, want)
	}
	if got, want := res["backend"], sandboxDown.kind; got != want {
		t.Errorf("backend = %v, want %s", got, want)
	}
}

// TestTransientProbeFailureNotCached: a probe that fails once fails one
// sandbox.run; the next runs on the same backend.
func TestTransientProbeFailureNotCached(t *testing.T) {
	sandboxFlaky.failures.Store(1)
	f := connectTo(t, mcpserver.Config{Backend: sandboxFlaky.kind})
	for i, want := range []job.Status{job.StatusBackendUnavailable, job.StatusCompleted} {
		out, isErr, text := call(t, f.cs, "sandbox.run", runArgs(f.ws, "true"))
		if isErr || out["status"] != string(want) {
			t.Errorf("call %d: status = %v (%s), want %s", i+1, out["status"], text, want)
		}
	}
}

// TestClientCannotWidenPolicy: a client may not pick another backend than
// the operator's, allow a shell the operator did not, or ask for a
// network. Each is refused before any job exists.
func TestClientCannotWidenPolicy(t *testing.T) {
	f := connectTo(t, mcpserver.Config{Backend: sandboxDown.kind})
	withPolicy := func(p map[string]any, argv ...string) map[string]any {
		a := runArgs(f.ws, argv...)
		for k, v := range p {
			a["policy"].(map[string]any)[k] = v
		}
		return a
	}
	withBackend := func(kind string) map[string]any {
		a := runArgs(f.ws, "true")
		a["backend"] = kind
		return a
	}
	tests := []struct {
		name string
		args map[string]any
		code job.Code
	}{
		{"backend local_process", withBackend("local_process"), job.CodeInvalidRequest},
		{"backend local-process spelling", withBackend("local-process"), job.CodeInvalidRequest},
		{"backend linux_sandbox", withBackend("linux_sandbox"), job.CodeInvalidRequest},
		{"allow_shell with env sh -c", withPolicy(map[string]any{"allow_shell": true}, "env", "sh", "-c", "id"), job.CodeShellDenied},
		{"allow_shell with /usr/bin/env bash", withPolicy(map[string]any{"allow_shell": true}, "/usr/bin/env", "bash", "-c", "id"), job.CodeShellDenied},
		{"allow_shell with a plain program", withPolicy(map[string]any{"allow_shell": true}, "true"), job.CodeShellDenied},
		{"network host", withPolicy(map[string]any{"network": "host"}, "true"), job.CodeNetworkDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, isErr, text := call(t, f.cs, "sandbox.run", tt.args)
			if !isErr || !strings.Contains(text, `"code":"`+string(tt.code)+`"`) {
				t.Errorf("sandbox.run = error %v %s, want tool error %s", isErr, text, tt.code)
			}
		})
	}
	// The operator's own backend, named or left out, is accepted.
	for _, kind := range []string{sandboxDown.kind, ""} {
		out, isErr, text := call(t, f.cs, "sandbox.run", withBackend(kind))
		if isErr || out["status"] != string(job.StatusBackendUnavailable) {
			t.Errorf("backend %q: %v %s, want the operator's backend (backend_unavailable here)", kind, out["status"], text)
		}
	}
}

// TestWrappedShellWithoutAllowShell: env sh -c without allow_shell reaches
// the runner, whose policy finds the shell behind the wrapper.
func TestWrappedShellWithoutAllowShell(t *testing.T) {
	f := connect(t)
	out, isErr, text := call(t, f.cs, "sandbox.run", runArgs(f.ws, "env", "sh", "-c", "id"))
	if isErr || out["status"] != string(job.StatusPolicyDenied) {
		t.Fatalf("env sh -c = %v %s, want policy_denied", out["status"], text)
	}
	e := out["result"].(map[string]any)["error"].(map[string]any)
	if got, want := e["code"], string(job.CodeShellDenied); got != want {
		t.Errorf("error.code = %v, want %s", got, want)
	}
}
