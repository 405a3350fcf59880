package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// startServe starts `agent-runner serve` with args on addr and waits until
// it answers; it is stopped with SIGTERM at cleanup.
func startServe(t *testing.T, addr string, args ...string) *exec.Cmd {
	t.Helper()
	return startServeEnv(t, addr, nil, args...)
}

// startServeEnv is startServe with env added to the server's environment.
func startServeEnv(t *testing.T, addr string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", addr, "--log-level", "warn", "--workspace-root", os.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	// /health needs no token, so this also waits for a serve with a
	// token file. The probe keeps no connection open: one left idle in a
	// client's pool would count against serve's --max-conns-per-ip.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := probe.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not come up")
		}
	}
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output %q: %v", s, err)
	}
	return v
}

// TestClientVerbs drives submit, status, wait, logs (plain and --follow)
// and cancel against a real serve process.
func TestClientVerbs(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, addr, "--store-dir", sandboxTempDir(t), "--workers", "1")
	server := "--server=http://" + addr
	ws := t.TempDir()
	req := requestFile(t, `{"workspace":{"path":"`+ws+`"},"command":{"argv":["sh","-c","echo out; echo err >&2"]},"policy":{"allowed_commands":["sh"],"allow_shell":true}}`)

	out, stderr, code := cli(t, "", "submit", server, "--request", req)
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, stderr)
	}
	acc := decode[client.Accepted](t, out)
	if acc.Status != job.StatusQueued || !strings.HasPrefix(acc.JobID, "job_") {
		t.Fatalf("submit = %+v, want a queued job_ id", acc)
	}
	out, stderr, code = cli(t, "", "wait", server, acc.JobID)
	if res := decode[job.Result](t, out); code != 0 || res.Status != job.StatusCompleted || res.Stdout.Text != "out\n" {
		t.Fatalf("wait = exit %d %s %q (%s)", code, res.Status, res.Stdout.Text, stderr)
	}
	out, _, code = cli(t, "", "status", server, acc.JobID)
	if res := decode[job.Result](t, out); code != 0 || res.JobID != acc.JobID || res.Status != job.StatusCompleted {
		t.Errorf("status = exit %d %+v", code, res.Status)
	}
	out, stderr, code = cli(t, "", "logs", server, acc.JobID)
	if code != 0 || out != "out\n" || stderr != "err\n" {
		t.Errorf("logs = exit %d stdout %q stderr %q, want out/err", code, out, stderr)
	}
	out, stderr, code = cli(t, "", "logs", "--follow", server, acc.JobID)
	if code != 0 || out != "out\n" || !strings.Contains(stderr, "err\n") || !strings.Contains(stderr, "is completed") {
		t.Errorf("logs --follow = exit %d stdout %q stderr %q", code, out, stderr)
	}
	// Submitting the same file with --wait prints the result.
	out, _, code = cli(t, "", "submit", "--wait", server, "--request", req)
	if res := decode[job.Result](t, out); code != 0 || res.Status != job.StatusCompleted {
		t.Errorf("submit --wait = exit %d %s", code, res.Status)
	}

	sleeper := requestFile(t, `{"workspace":{"path":"`+ws+`"},"command":{"argv":["sleep","30"]},"policy":{"allowed_commands":["sleep"]}}`)
	out, _, _ = cli(t, "", "submit", server, "--request", sleeper)
	running := decode[client.Accepted](t, out)
	c := client.New("http://"+addr, "")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, _ := c.Get(context.Background(), running.JobID); st.Status == job.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleeper never ran")
		}
	}
	out, stderr, code = cli(t, "", "cancel", server, running.JobID)
	if res := decode[job.Result](t, out); code != 0 || res.Status != job.StatusCanceled {
		t.Errorf("cancel = exit %d %s (%s), want canceled", code, res.Status, stderr)
	}

	_, stderr, code = cli(t, "", "status", server, "job_missing")
	if code != exitInvalid || !strings.Contains(stderr, string(job.CodeJobNotFound)) {
		t.Errorf("status of an unknown job = exit %d %q, want %d job.not_found", code, stderr, exitInvalid)
	}
	_, stderr, code = cli(t, "", "status", "--server=http://"+freeAddr(t), "job_x")
	if code != exitOperational {
		t.Errorf("status against no server = exit %d %q, want %d", code, stderr, exitOperational)
	}
}

// TestServeRefusesNonLoopbackWithoutTokens checks the secure default.
func TestServeRefusesNonLoopbackWithoutTokens(t *testing.T) {
	_, stderr, code := cli(t, "", "serve", "--addr", "0.0.0.0:0", "--store-dir", t.TempDir())
	if code != exitInvalid || !strings.Contains(stderr, "--token-file") {
		t.Errorf("serve on 0.0.0.0 without tokens = exit %d %q, want %d naming --token-file", code, stderr, exitInvalid)
	}
}

// TestWorkerJoinsExternalQueue runs an API-only serve node that exposes
// its NATS server, and a separate `worker --nats URL` process on the same
// store that runs the jobs.
func TestWorkerJoinsExternalQueue(t *testing.T) {
	store := sandboxTempDir(t)
	addr, natsAddr := freeAddr(t), freeAddr(t)
	startServe(t, addr, "--store-dir", store, "--no-workers", "--nats-listen", natsAddr, "--queue-capacity", "7")
	c := client.New("http://"+addr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := t.TempDir()
	acc, err := c.Submit(ctx, []byte(`{"workspace":{"path":"`+ws+`"},"command":{"argv":["echo","from a worker"]},"policy":{"allowed_commands":["echo"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Get(ctx, acc.JobID); st.Status != job.StatusQueued {
		t.Fatalf("with no workers the job is %s, want queued", st.Status)
	}
	w := exec.Command(binary, "worker", "--nats", "nats://"+natsAddr, "--nats-token-file", filepath.Join(store, "nats", "token"), "--store-dir", store, "--log-level", "warn", "--workspace-root", os.TempDir())
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { w.Process.Signal(syscall.SIGTERM); w.Wait() }()
	res, err := c.Wait(ctx, acc.JobID, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusCompleted || res.Stdout.Text != "from a worker\n" {
		t.Errorf("job run by the worker = %s %q", res.Status, res.Stdout.Text)
	}
	// The worker joined without changing the queue's capacity.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "agent_runner_queue_capacity 7") {
		t.Errorf("queue capacity changed by the worker:\n%s", grepLines(string(metrics), "queue_capacity"))
	}
	if _, err := os.Stat(filepath.Join(store, "runs", acc.JobID, "result.json")); err != nil {
		t.Errorf("no result.json in the shared store: %v", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
