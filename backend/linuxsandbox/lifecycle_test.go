package linuxsandbox_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/job"
)

func TestLifecycle(t *testing.T) {
	backendtest.Lifecycle(t, backendtest.New(linuxsandbox.Kind, suiteConfig()))
}

// BenchmarkLifecycle reports the phases of a kept sandbox apart (create,
// one exec of /bin/true, delete) beside a one-shot Run of /bin/true on
// the same backend: ns/op is the whole cycle.
func BenchmarkLifecycle(b *testing.B) {
	sb := benchSandbox(b)
	ctx := context.Background()
	var create, execT, del, run time.Duration
	for b.Loop() {
		spec, _, _ := backendtest.Spec(b, "/bin/true")
		t0 := time.Now()
		s, err := sb.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if o, err := s.Exec(ctx, backend.Exec{Argv: []string{"/bin/true"}}); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
			b.Fatalf("Exec(/bin/true) = %+v, %v", o, err)
		}
		t2 := time.Now()
		if err := s.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if o, err := sb.Run(ctx, spec); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
			b.Fatalf("Run(/bin/true) = %+v, %v", o, err)
		}
		create, execT, del, run = create+t1.Sub(t0), execT+t2.Sub(t1), del+t3.Sub(t2), run+time.Since(t3)
	}
	n := float64(b.N)
	b.ReportMetric(float64(create.Microseconds())/n, "create-µs/op")
	b.ReportMetric(float64(execT.Microseconds())/n, "exec-µs/op")
	b.ReportMetric(float64(del.Microseconds())/n, "delete-µs/op")
	b.ReportMetric(float64(run.Microseconds())/n, "run-µs/op")
}

// BenchmarkExecInLiveSandbox is one Exec of /bin/true in a sandbox kept
// across iterations: the cost a session or agent task pays per command.
func BenchmarkExecInLiveSandbox(b *testing.B) {
	sb := benchSandbox(b)
	ctx := context.Background()
	spec, _, _ := backendtest.Spec(b, "/bin/true")
	s, err := sb.Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Delete(ctx)
	for b.Loop() {
		if _, err := s.Exec(ctx, backend.Exec{Argv: []string{"/bin/true"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunOneShot is today's one-shot Run of /bin/true.
func BenchmarkRunOneShot(b *testing.B) {
	sb := benchSandbox(b)
	ctx := context.Background()
	spec, _, _ := backendtest.Spec(b, "/bin/true")
	for b.Loop() {
		if _, err := sb.Run(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
}

// benchSandbox is a backend with the default view, or skips b.
func benchSandbox(b *testing.B) *linuxsandbox.Backend {
	sb, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := sb.Available(context.Background()); err != nil {
		b.Skipf("linux_sandbox unavailable on this host: %v", err)
	}
	return sb
}

// TestSandboxOwnsWrittenFilesAndOOM: a file the host writes is the workload's
// (its uid inside), and an exec that passes the sandbox's memory limit
// is reported oom while the sandbox lives on.
func TestSandboxOwnsWrittenFilesAndOOM(t *testing.T) {
	sb := sandbox(t)
	ctx := context.Background()
	spec, _, _ := backendtest.Spec(t)
	spec.Limits.MemoryBytes = 32 << 20
	s, err := sb.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Delete(ctx)
	if err := s.WriteFile(ctx, "given", strings.NewReader("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out backendtest.Buffer
	o, err := s.Exec(ctx, backend.Exec{Argv: []string{"/bin/sh", "-c", `test "$(stat -c %u given)" = "$(id -u)" && echo mine`}, Stdout: &out})
	if err != nil || out.String() != "mine\n" {
		t.Errorf("the written file's owner is not the exec's uid: %+v %v %q", o, err, out.String())
	}
	// The workload, not the init, is what the OOM killer takes: under
	// -race the init (this test binary) outweighed the shell and was
	// killed, and the sandbox lost its PID 1.
	var adj backendtest.Buffer
	if _, err := s.Exec(ctx, backend.Exec{Argv: []string{"/bin/cat", "/proc/self/oom_score_adj"}, Stdout: &adj}); err != nil || adj.String() != "1000\n" {
		t.Errorf("an exec's oom_score_adj = %q, %v; want 1000", adj.String(), err)
	}
	if !slices.Contains(o.Enforced, job.LimitMemory) {
		t.Skipf("memory limit not enforced here: %v", o.NotEnforced)
	}
	o, err = s.Exec(ctx, backend.Exec{Argv: []string{"/bin/sh", "-c", `a=$(head -c 100000000 /dev/zero | tr '\0' x); echo ${#a}`}})
	if err != nil || o.Reason != job.ReasonOOM {
		t.Errorf("Exec over the memory limit = reason %q signal %q exit %v, %v; want %q", o.Reason, o.Signal, o.ExitCode, err, job.ReasonOOM)
	}
	if o, err := s.Exec(ctx, backend.Exec{Argv: []string{"/bin/true"}}); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Errorf("Exec after an OOM = %+v, %v; want exit 0", o, err)
	}
}
