package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// apiNode starts `serve --no-workers --nats-listen` on its own store and
// returns its client and NATS URL.
func apiNode(t *testing.T, store string) (*client.Client, string) {
	t.Helper()
	addr, natsAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(binary, "serve", "--addr", addr, "--store-dir", store, "--no-workers", "--nats-listen", natsAddr,
		"--ack-wait", "2s", "--log-level", "warn", "--workspace-root", os.TempDir(),
		"--default-backend", "local_process", "--unsafe-local-process")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := client.New("http://"+addr, "")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := c.Get(context.Background(), "job_probe"); err != nil && strings.Contains(err.Error(), "job.not_found") {
			// The listener's generated token (no AGENT_RUNNER_NATS_TOKEN).
			token, err := os.ReadFile(filepath.Join(store, "nats", "token"))
			if err != nil {
				t.Fatal(err)
			}
			return c, "nats://" + strings.TrimSpace(string(token)) + "@" + natsAddr
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not come up")
		}
	}
}

// remoteWorker starts `agent-runner worker` on its own store.
func remoteWorker(t *testing.T, natsURL, store string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "worker", "--nats", natsURL, "--store-dir", store, "--workers", "2", "--log-level", "warn",
		"--workspace-root", os.TempDir(), "--default-backend", "local_process", "--unsafe-local-process", "--task-heartbeat", "200ms")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func remoteRequest(t *testing.T, ws string, argv []string, extra map[string]any) []byte {
	t.Helper()
	req := map[string]any{
		"workspace": map[string]any{"path": ws},
		"command":   map[string]any{"argv": argv},
		"policy":    map[string]any{"allowed_commands": []string{argv[0]}, "artifact_globs": []string{"out/**"}},
		"backend":   map[string]any{"kind": "local_process"},
	}
	if argv[0] == "sh" {
		req["policy"].(map[string]any)["allow_shell"] = true
	}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	return b
}

// TestRemoteWorkerWithItsOwnStore: a job that runs on a worker with its
// own store is served by the API node: result, stdout, artifact list and
// an artifact download with the recorded SHA-256.
func TestRemoteWorkerWithItsOwnStore(t *testing.T) {
	apiStore, workerStore, ws := t.TempDir(), t.TempDir(), t.TempDir()
	c, natsURL := apiNode(t, apiStore)
	remoteWorker(t, natsURL, workerStore)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acc, err := c.Submit(ctx, remoteRequest(t, ws, []string{"sh", "-c",
		"echo hello; mkdir -p out; head -c 300000 /dev/urandom > out/big.bin; echo small > out/small.txt"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, acc.JobID, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("Wait: %v (the job never finished on the API node)", err)
	}
	if res.Status != job.StatusCompleted || res.Stdout.Text != "hello\n" {
		t.Fatalf("result = %s, stdout %q, error %+v; want completed with %q", res.Status, res.Stdout.Text, res.Error, "hello\n")
	}
	arts, err := c.Artifacts(ctx, acc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var big job.Artifact
	for _, a := range arts {
		names = append(names, a.Path)
		if a.Path == "out/big.bin" {
			big = a
		}
	}
	if strings.Join(names, ",") != "out/big.bin,out/small.txt" {
		t.Fatalf("artifacts = %q, want out/big.bin and out/small.txt", names)
	}
	var body bytes.Buffer
	header, err := c.Download(ctx, acc.JobID, "out/big.bin", &body)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body.Bytes())
	if got := hex.EncodeToString(sum[:]); got != big.SHA256 || header != big.SHA256 || body.Len() != 300000 {
		t.Errorf("download: %d bytes, sha256 %s, header %s; want 300000 bytes, %s", body.Len(), got, header, big.SHA256)
	}
	// The record lies in both stores: the worker's own, and the API
	// node's copy (no shared filesystem between them).
	for _, store := range []string{workerStore, apiStore} {
		if _, err := os.Stat(filepath.Join(store, "runs", acc.JobID, "artifacts", "out", "big.bin")); err != nil {
			t.Errorf("record in %s: %v", store, err)
		}
	}
}

// TestRemoteWorkerKilledMidJob: a worker killed with SIGKILL mid-job
// leaves its jobs unacknowledged; a second worker with another store runs
// the one that may run again (attempt 2) and ends the one that opted out
// as interrupted. Neither stays running on the API node.
func TestRemoteWorkerKilledMidJob(t *testing.T) {
	apiStore, ws := t.TempDir(), t.TempDir()
	c, natsURL := apiNode(t, apiStore)
	first := remoteWorker(t, natsURL, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	retry, err := c.Submit(ctx, remoteRequest(t, ws, []string{"sleep", "3"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	noRetry, err := c.Submit(ctx, remoteRequest(t, ws, []string{"sleep", "3.1"}, map[string]any{"on_interrupt": "fail"}))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "both jobs running on the first worker, as the API node shows them", func() bool {
		for _, id := range []string{retry.JobID, noRetry.JobID} {
			st, err := c.Get(ctx, id)
			if err != nil || st.Status != job.StatusRunning || st.Attempt != 1 {
				return false
			}
		}
		return true
	})
	first.Process.Kill()
	first.Wait()
	remoteWorker(t, natsURL, t.TempDir())
	res, err := c.Wait(ctx, retry.JobID, 50*time.Millisecond)
	if err != nil || res.Status != job.StatusCompleted || res.Attempt != 2 {
		t.Errorf("retried job = %s attempt %d, %v; want completed on attempt 2", res.Status, res.Attempt, err)
	}
	res, err = c.Wait(ctx, noRetry.JobID, 50*time.Millisecond)
	if err != nil || res.Status != job.StatusFailed || res.Error == nil || res.Error.Code != job.CodeRunInterrupted {
		t.Errorf("opted-out job = %s %+v, %v; want failed with %s", res.Status, res.Error, err, job.CodeRunInterrupted)
	}
}
