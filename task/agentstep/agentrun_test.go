package agentstep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

// staged returns a staged task whose agent is a shell script.
func staged(t *testing.T, script, timeout string) (stage.Layout, *manifest.Task, string) {
	t.Helper()
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	base := filepath.Dir(origin)
	doc := `version: "1"
kind: Task
metadata: {id: task-e2e, name: E2E}
repository: {url: "` + origin + `", branch: main}
claude: {prompt: "edit a.txt"}
agent: {command: ["/bin/sh"]}
lifecycle: {timeout: ` + timeout + `}
vm: {memory: 512M, cpus: 1}
`
	tk, err := manifest.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tk.Agent.Command = []string{"/bin/sh", "-c", script}
	l := stage.Layout{Dir: filepath.Join(base, "task")}
	if err := stage.Stage(context.Background(), l, tk, []byte(doc), stage.Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	return l, tk, origin
}

const secret = "sk-test-5f1e2d3c4b5a"

func TestAgentRunEditsStreamsAndScrubs(t *testing.T) {
	script := `printf '{"type":"system","subtype":"init"}\n'
printf '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read"}]}}\n'
echo "three" > a.txt
echo "new file" > added.txt
printf '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Edit"}]}}\n'
echo "the key is $ANTHROPIC_API_KEY"
echo "stderr has $ANTHROPIC_API_KEY too" >&2
printf '{"type":"result","subtype":"success"}\n'`
	l, tk, origin := staged(t, script, "1h")
	var live strings.Builder
	out, err := agentstep.Run(context.Background(), l, tk, map[string]string{"ANTHROPIC_API_KEY": secret}, agentstep.Config{
		Backend: tasktest.Backend(t), Output: func(stream string, p []byte) { live.Write(p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode == nil || *out.ExitCode != 0 || out.Reason != job.ReasonExit {
		t.Fatalf("outcome = %+v", out)
	}
	if out.Progress.ToolCalls != 2 || out.Progress.Events != 4 || out.Progress.OutputBytes == 0 {
		t.Errorf("progress = %+v", out.Progress)
	}
	for _, f := range []string{"stdout.log", "stderr.log"} {
		b, _ := os.ReadFile(filepath.Join(l.Progress(), f))
		if strings.Contains(string(b), secret) || !strings.Contains(string(b), agentstep.Redacted) {
			t.Errorf("%s is not scrubbed: %q", f, b)
		}
	}
	if strings.Contains(live.String(), secret) {
		t.Error("a live subscriber saw the secret")
	}
	arts, err := stage.Collect(context.Background(), l, tk, tasktest.Backend(t), stage.CollectLimits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := t.TempDir()
	tasktest.Git(t, check, "clone", "--quiet", origin, ".")
	tasktest.Git(t, check, "apply", filepath.Join(l.Artifacts(), arts[0].Name))
	if b, _ := os.ReadFile(filepath.Join(check, "a.txt")); string(b) != "three\n" {
		t.Errorf("patched a.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(check, "added.txt")); err != nil {
		t.Error("new file missing from the patch")
	}
}

func TestHangTimeout(t *testing.T) {
	l, tk, _ := staged(t, `echo started; sleep 60`, "1h")
	out, err := agentstep.Run(context.Background(), l, tk, nil, agentstep.Config{Backend: tasktest.Backend(t), HangTimeout: 400 * time.Millisecond})
	if err != nil || out.Reason != agentstep.ReasonHang {
		t.Errorf("silent agent = %+v %v, want reason hang", out, err)
	}
}

func TestTaskTimeout(t *testing.T) {
	l, tk, _ := staged(t, `while true; do echo tick; sleep 0.1; done`, "1s")
	out, err := agentstep.Run(context.Background(), l, tk, nil, agentstep.Config{Backend: tasktest.Backend(t), HangTimeout: time.Minute})
	if err != nil || out.Reason != job.ReasonTimeout {
		t.Errorf("endless agent = %+v %v, want reason timeout", out, err)
	}
}

// An allowlist run without a gateway bridge fails before anything runs
// (the lifecycle decides the mode and opens the bridge).
func TestAllowlistNeedsABridge(t *testing.T) {
	l, tk, _ := staged(t, `true`, "1h")
	tk.VM.NetworkMode = "outbound"
	_, err := agentstep.Run(context.Background(), l, tk, nil, agentstep.Config{Backend: tasktest.Backend(t), Network: job.NetworkAllowlist})
	if job.CodeOf(err) != job.CodeBackendSetupFailed {
		t.Errorf("outbound task without a bridge = %v, want %s", err, job.CodeBackendSetupFailed)
	}
}

// TestHeartbeatsReportProgressAndCgroupUsage: an agent that holds 32 MiB
// and keeps printing stream-json gets periodic heartbeats in
// metrics.jsonl with its progress and, on linux_sandbox, memory and CPU.
func TestHeartbeatsReportProgressAndCgroupUsage(t *testing.T) {
	script := `python3 -c '
import time, sys
b = bytearray(32 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
for n in range(8):
    print("{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\",\"name\":\"Bash\"}]}}", flush=True)
    end = time.time() + 0.15
    while time.time() < end:
        pass
'`
	l, tk, _ := staged(t, script, "1h")
	b := tasktest.Backend(t)
	out, err := agentstep.Run(context.Background(), l, tk, nil, agentstep.Config{Backend: b, HeartbeatEvery: 100 * time.Millisecond})
	if err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("run = %+v %v", out, err)
	}
	data, err := os.ReadFile(filepath.Join(l.Progress(), agentstep.HeartbeatFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 5 {
		t.Fatalf("%d heartbeats in a 1.2 s run at 100 ms", len(lines))
	}
	last, ok := agentstep.LastHeartbeat(l.Progress())
	if !ok || last.TaskID != tk.Metadata.ID || last.Progress.ToolCalls != 8 || last.Progress.CurrentTool != "Bash" {
		t.Fatalf("last heartbeat = %+v", last)
	}
	if !slices.Contains(b.Capabilities().Enforces, job.LimitMemory) {
		t.Logf("no cgroups here: heartbeats carry progress only")
		return
	}
	var maxMem int64
	var maxCPU float64
	for _, line := range lines {
		var hb agentstep.Heartbeat
		if err := json.Unmarshal([]byte(line), &hb); err != nil {
			t.Fatalf("heartbeat %q: %v", line, err)
		}
		if hb.MemoryBytes != nil {
			maxMem = max(maxMem, *hb.MemoryBytes)
		}
		if hb.CPUSeconds != nil {
			maxCPU = max(maxCPU, *hb.CPUSeconds)
		}
	}
	if maxMem < 32<<20 || maxCPU < 0.05 {
		t.Errorf("heartbeats saw at most %d bytes and %.2f s CPU", maxMem, maxCPU)
	}
}

// TestLastHeartbeatReadsTheLastCompleteLine: a torn last line is skipped,
// and a long file is read from its tail.
func TestLastHeartbeatReadsTheLastCompleteLine(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, `{"time":"2026-01-01T00:00:00Z","task_id":"t","progress":{"tool_calls":%d}}`+"\n", i)
	}
	b.WriteString(`{"time":"2026-01-01T00:00:01Z","task_id":"t","progr`) // torn by a crash
	os.WriteFile(filepath.Join(dir, agentstep.HeartbeatFile), []byte(b.String()), 0o644)
	hb, ok := agentstep.LastHeartbeat(dir)
	if !ok || hb.Progress.ToolCalls != 1999 {
		t.Errorf("last heartbeat = %+v %v", hb, ok)
	}
	if _, ok := agentstep.LastHeartbeat(t.TempDir()); ok {
		t.Error("a heartbeat from no file")
	}
}
