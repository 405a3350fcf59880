package agentstep_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestAgentInTheTaskSandbox: in the task's sandbox the agent runs as one
// of its processes, recorded as such, with its output scrubbed into the
// progress logs and heartbeats that carry the sandbox's usage (on
// linux_sandbox: the 32 MiB it holds) as a sandbox of its own gave them.
func TestAgentInTheTaskSandbox(t *testing.T) {
	script := `python3 -c '
import time
b = bytearray(32 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
for n in range(6):
    print("key=" + "` + secret + `", flush=True)
    end = time.time() + 0.15
    while time.time() < end:
        pass
'`
	l, tk, _ := staged(t, script, "1h")
	b := tasktest.Backend(t)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg := agentstep.Config{Backend: b, Runner: r, HeartbeatEvery: 100 * time.Millisecond}
	sb, err := agentstep.OpenSandbox(context.Background(), r, l, tk, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	cfg.Sandbox = sb
	out, err := agentstep.Run(context.Background(), l, tk, map[string]string{"KEY": secret}, cfg)
	if err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("run = %+v %v", out, err)
	}
	res, err := r.Store().ReadResult(out.RunID)
	if err != nil || res.Sandbox != "task-e2e.sandbox" || res.Status != job.StatusCompleted {
		t.Errorf("agent run %s = %s in sandbox %q, %v; want completed in task-e2e.sandbox", out.RunID, res.Status, res.Sandbox, err)
	}
	logged, _ := os.ReadFile(filepath.Join(l.Progress(), "stdout.log"))
	if strings.Contains(string(logged), secret) || strings.Contains(res.Stdout.Text, secret) || !strings.Contains(res.Stdout.Text, "key=") {
		t.Errorf("stdout.log %q and the record's stdout %q: want the output, scrubbed", logged, res.Stdout.Text)
	}
	if !slices.Contains(b.Capabilities().Enforces, job.LimitMemory) {
		t.Logf("no cgroups here: heartbeats carry progress only")
		return
	}
	data, err := os.ReadFile(filepath.Join(l.Progress(), agentstep.HeartbeatFile))
	if err != nil {
		t.Fatal(err)
	}
	var maxMem int64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var hb agentstep.Heartbeat
		if err := json.Unmarshal([]byte(line), &hb); err != nil {
			t.Fatalf("heartbeat %q: %v", line, err)
		}
		if hb.MemoryBytes != nil {
			maxMem = max(maxMem, *hb.MemoryBytes)
		}
	}
	if maxMem < 32<<20 {
		t.Errorf("heartbeats saw at most %d bytes of memory, want the agent's 32 MiB", maxMem)
	}
}
