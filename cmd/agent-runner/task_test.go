package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestTaskVerbs drives a task through the CLI against a real serve.
func TestTaskVerbs(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n", "agent.sh": "echo from-agent\necho two > a.txt\n"})
	base := filepath.Dir(origin)
	store := filepath.Join(base, "store")
	addr := freeAddr(t)
	srv := startServer(t, store, addr)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	server := "http://" + addr
	manifest := filepath.Join(base, "task.yaml")
	os.WriteFile(manifest, []byte(`version: "1"
kind: Task
metadata: {id: cli-task, name: CLI task}
repository: {url: "`+origin+`", branch: main}
claude: {prompt: "edit"}
agent: {command: ["/bin/sh", "agent.sh"]}
`), 0o644)
	out, stderr, code := cli(t, "", "task", "submit", manifest, "--server", server)
	if code != 0 || !strings.Contains(out, `"cli-task"`) {
		t.Fatalf("task submit = %d %s %s", code, out, stderr)
	}
	out, stderr, code = cli(t, "", "task", "logs", "--follow", "cli-task", "--server", server)
	if code != 0 || !strings.Contains(out, "from-agent") || !strings.Contains(stderr, "is completed") {
		t.Errorf("task logs --follow = %d %q %q", code, out, stderr)
	}
	out, _, code = cli(t, "", "task", "status", "--watch", "cli-task", "--server", server)
	var st map[string]any
	json.Unmarshal([]byte(out), &st)
	if code != 0 || st["state"] != "completed" {
		t.Errorf("task status = %d %s", code, out)
	}
	out, _, _ = cli(t, "", "task", "list", "--state", "completed", "--server", server)
	if !strings.Contains(out, `"total_count": 1`) {
		t.Errorf("task list = %s", out)
	}
	out, _, _ = cli(t, "", "task", "artifacts", "cli-task", "--server", server)
	if !strings.Contains(out, "cli-task.patch") {
		t.Errorf("task artifacts = %s", out)
	}
	patch := filepath.Join(base, "out.patch")
	if _, stderr, code := cli(t, "", "task", "download", "cli-task", "cli-task.patch", "--out", patch, "--server", server); code != 0 {
		t.Fatalf("task download = %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(patch); !strings.Contains(string(b), "+two") {
		t.Errorf("downloaded patch = %q", b)
	}
	// The agentic_* metrics on the server's /metrics.
	resp, err := http.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`agentic_tasks_total{state="completed"} 1`, `agentic_tasks_active{state="running"} 0`,
		`agentic_task_duration_seconds_count{outcome="completed"} 1`, `agentic_provision_duration_seconds_count 1`,
		`agentic_vm_provision_duration_seconds_count 1`, `agentic_agent_connected 0`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if _, stderr, code := cli(t, "", "task", "status", "nope", "--server", server); code != exitInvalid || !strings.Contains(stderr, "job.not_found") {
		t.Errorf("unknown task = %d %s", code, stderr)
	}
}

// TestTaskSurvivesServerKill SIGKILLs serve while a task's agent runs and
// restarts it: the task ends in a recorded state, never stuck running, and
// no agent process outlives the server.
func TestTaskSurvivesServerKill(t *testing.T) {
	marker := "slow-agent-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	origin := tasktest.Origin(t, map[string]string{"agent.sh": "echo started\nexec python3 -c 'import time; time.sleep(300)' " + marker + "\n"})
	base := filepath.Dir(origin)
	store := filepath.Join(base, "store")
	addr := freeAddr(t)
	server := "http://" + addr
	srv := startServer(t, store, addr)
	manifest := filepath.Join(base, "task.yaml")
	os.WriteFile(manifest, []byte(`version: "1"
kind: Task
metadata: {id: killed-task, name: K}
repository: {url: "`+origin+`", branch: main}
claude: {prompt: "sleep"}
agent: {command: ["/bin/sh", "agent.sh"]}
`), 0o644)
	if _, stderr, code := cli(t, "", "task", "submit", manifest, "--server", server); code != 0 {
		t.Fatalf("submit: %s", stderr)
	}
	for deadline := time.Now().Add(20 * time.Second); !processWith(marker); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never started")
		}
	}
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	for deadline := time.Now().Add(5 * time.Second); processWith(marker); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent outlived the SIGKILLed server")
		}
	}
	srv = startServer(t, store, addr)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	out, _, code := cli(t, "", "task", "status", "killed-task", "--server", server)
	var st struct {
		State string
		Error struct{ Code string }
	}
	json.Unmarshal([]byte(out), &st)
	if code != 0 || st.State != "failed" || st.Error.Code != "run.interrupted" {
		t.Errorf("after restart: %s", out)
	}
}
