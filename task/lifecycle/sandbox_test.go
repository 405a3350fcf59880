package lifecycle_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// watchedBackend is linux_sandbox that counts one-shot runs and the
// sandboxes it creates, starts in and deletes. Before each process after
// a sandbox's first, it runs probe in that sandbox and keeps its output:
// what the sandbox holds when the collection starts.
type watchedBackend struct {
	*linuxsandbox.Backend
	probe []string

	mu        sync.Mutex
	runs      int
	created   []string
	starts    map[string]int
	deleted   map[string]int
	probeSeen []string
}

func (b *watchedBackend) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	b.mu.Lock()
	b.runs++
	b.mu.Unlock()
	return b.Backend.Run(ctx, spec)
}

func (b *watchedBackend) Create(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	sb, err := b.Backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.created = append(b.created, sb.ID())
	b.mu.Unlock()
	return &watchedSandbox{Sandbox: sb, b: b}, nil
}

type watchedSandbox struct {
	backend.Sandbox
	b *watchedBackend
}

func (s *watchedSandbox) Start(ctx context.Context, e backend.Exec) (backend.Process, error) {
	s.b.mu.Lock()
	n := s.b.starts[s.ID()]
	s.b.starts[s.ID()]++
	s.b.mu.Unlock()
	if n > 0 && s.b.probe != nil {
		var out bytes.Buffer
		if _, err := s.Sandbox.Exec(ctx, backend.Exec{Argv: s.b.probe, Stdout: &out, Stderr: &out, Timeout: 10 * time.Second}); err != nil {
			out.WriteString(err.Error())
		}
		s.b.mu.Lock()
		s.b.probeSeen = append(s.b.probeSeen, out.String())
		s.b.mu.Unlock()
	}
	return s.Sandbox.Start(ctx, e)
}

func (s *watchedSandbox) Delete(ctx context.Context) error {
	s.b.mu.Lock()
	s.b.deleted[s.ID()]++
	s.b.mu.Unlock()
	return s.Sandbox.Delete(ctx)
}

// watched is a watchedBackend, or a skip where linux_sandbox cannot run
// (local_process's Delete does not wait for its kills to land, so what
// is left could not be checked without a timed wait).
func watched(t *testing.T, probe ...string) *watchedBackend {
	t.Helper()
	b, ok := tasktest.Backend(t).(*linuxsandbox.Backend)
	if !ok {
		t.Skip("needs linux_sandbox")
	}
	return &watchedBackend{Backend: b, probe: probe, starts: map[string]int{}, deleted: map[string]int{}}
}

// leftovers are the host's processes whose command line holds marker
// and the cgroups named for sandbox id.
func leftovers(t *testing.T, marker, id string) []string {
	t.Helper()
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			found = append(found, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), "agent-runner-"+id+"-") {
			found = append(found, p)
			return fs.SkipDir
		}
		return nil
	})
	return found
}

// TestStepsShareTheTaskSandbox: the agent and the collection are two
// processes of one sandbox: the sandbox is created once and no one-shot
// run is made, the collection starts in a sandbox that holds what the
// agent wrote to its private /tmp, both run records name the sandbox,
// and after the task the sandbox is deleted with the process the agent
// left behind.
func TestStepsShareTheTaskSandbox(t *testing.T) {
	b := watched(t, "/bin/cat", "/tmp/agent-note")
	dir, tk, doc := submit(t, `echo changed > a.txt; echo agent-was-here >/tmp/agent-note; sleep 7777.4242 >/dev/null 2>&1 &`, "")
	r := stepRunner(t)
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: b, CloneBackoff: &quick, Runner: r})
	if err != nil || md.State != state.Completed {
		t.Fatalf("task = %s %+v, %v", md.State, md.Error, err)
	}
	const id = "task-lc.sandbox"
	if len(b.created) != 1 || b.created[0] != id || b.runs != 0 {
		t.Errorf("sandboxes created %v and one-shot runs %d, want [%s] and 0", b.created, b.runs, id)
	}
	if b.starts[id] != 2 {
		t.Errorf("processes started in %s = %d, want 2 (agent, collection)", id, b.starts[id])
	}
	if len(b.probeSeen) != 1 || b.probeSeen[0] != "agent-was-here\n" {
		t.Errorf("the collection's sandbox held /tmp/agent-note = %q, want the agent's", b.probeSeen)
	}
	for _, step := range []string{"agent", "collect"} {
		res, err := r.Store().ReadResult(md.StepRuns[step])
		if err != nil || res.Status != job.StatusCompleted || res.Sandbox != id {
			t.Errorf("%s run = %s in sandbox %q, %v; want completed in %s", step, res.Status, res.Sandbox, err, id)
		}
	}
	if patch, _ := os.ReadFile(filepath.Join(dir, "outbox", "artifacts", "task-lc.patch")); !strings.Contains(string(patch), "+changed") {
		t.Errorf("patch = %q", patch)
	}
	if b.deleted[id] == 0 {
		t.Errorf("the task's sandbox was never deleted")
	}
	if left := leftovers(t, "7777.4242", id); len(left) > 0 {
		t.Errorf("left after the task: %v", left)
	}
}

// TestTaskSandboxIsDeletedOnEveryEnd: however the agent ends (failing,
// timing out, hanging, cancelled), the task's sandbox is deleted before
// Run returns, with what the agent left running in it and its cgroups.
func TestTaskSandboxIsDeletedOnEveryEnd(t *testing.T) {
	tests := []struct {
		name, script, extra string
		marker              string
		hang                time.Duration
		cancel              bool
		want                state.State
	}{
		{name: "failure", marker: "7777.311", script: `exit 3`, want: state.Failed},
		{name: "timeout", marker: "7777.312", script: `sleep 60`, extra: "lifecycle: {timeout: 1s}\n", want: state.Failed},
		{name: "hang", marker: "7777.313", script: `sleep 60`, hang: 500 * time.Millisecond, want: state.Failed},
		{name: "cancel", marker: "7777.314", script: `while true; do echo working; sleep 0.1; done`, cancel: true, want: state.Cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := watched(t)
			// In a session of its own: no stop of the agent's group
			// reaches it, only the sandbox's deletion.
			dir, tk, doc := submit(t, `setsid sleep `+tt.marker+` >/dev/null 2>&1 & `+tt.script, tt.extra)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				go func() {
					// Cancel once the agent is looping, however slow the
					// machine is.
					defer cancel()
					for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
						if b, _ := os.ReadFile(filepath.Join(dir, "outbox", "progress", "stdout.log")); strings.Contains(string(b), "working") {
							return
						}
					}
				}()
			}
			md, err := lifecycle.Run(ctx, dir, tk, doc, lifecycle.Config{Backend: b, CloneBackoff: &quick, Runner: stepRunner(t), HangTimeout: tt.hang})
			if err != nil || md.State != tt.want {
				t.Fatalf("task = %s %+v, %v; want %s", md.State, md.Error, err, tt.want)
			}
			const id = "task-lc.sandbox"
			if len(b.created) != 1 || b.deleted[id] == 0 {
				t.Errorf("sandboxes created %v, deletes of %s %d; want one, deleted", b.created, id, b.deleted[id])
			}
			if left := leftovers(t, tt.marker, id); len(left) > 0 {
				t.Errorf("left after the task: %v", left)
			}
		})
	}
}

// TestExecConfinementGetsSandboxesOfItsOwn: under a task policy that
// confines execs for a whole sandbox (allow_shell false), the agent and
// the collection each run in a sandbox of their own, as before: the
// agent's shell denial cannot reach the collection's shell, and the task
// completes with neither record naming a shared sandbox.
func TestExecConfinementGetsSandboxesOfItsOwn(t *testing.T) {
	b := watched(t)
	dir, tk, doc := submit(t, ``, "")
	tk.Agent.Command = []string{"/usr/bin/touch", "RAN"}
	r := stepRunner(t)
	pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "touch"}}}
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: b, CloneBackoff: &quick, Runner: r, Policy: pol})
	if err != nil || md.State != state.Completed {
		t.Fatalf("task = %s %+v, %v", md.State, md.Error, err)
	}
	if len(b.created) != 0 || b.runs != 2 {
		t.Errorf("sandboxes created %v and one-shot runs %d, want none and 2", b.created, b.runs)
	}
	for _, step := range []string{"agent", "collect"} {
		res, err := r.Store().ReadResult(md.StepRuns[step])
		if err != nil || res.Status != job.StatusCompleted || res.Sandbox != "" {
			t.Errorf("%s run = %s in sandbox %q, %v; want completed in one of its own", step, res.Status, res.Sandbox, err)
		}
	}
	if patch, _ := os.ReadFile(filepath.Join(dir, "outbox", "artifacts", "task-lc.patch")); !strings.Contains(string(patch), "RAN") {
		t.Errorf("patch = %q, want the agent's new file", patch)
	}
}
