package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// TestRemoteListenerTokenIsGenerated: a loopback --nats-listen without
// AGENT_RUNNER_NATS_TOKEN generates a token only the runner's user can
// read, and refuses clients that do not present it.
func TestRemoteListenerTokenIsGenerated(t *testing.T) {
	store := t.TempDir()
	_, natsURL := apiNode(t, store)
	path := filepath.Join(store, "nats", "token")
	for name, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %o, want %o", name, got, want)
		}
	}
	u, err := url.Parse(natsURL)
	if err != nil || u.User.Username() != tokenOf(t, path) {
		t.Fatalf("NATS URL %q does not carry the generated token", natsURL)
	}
	anonymous := "nats://" + u.Host
	if nc, err := nats.Connect(anonymous, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Error("a client without the token connected")
	}
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("a client with the generated token: %v", err)
	}
	nc.Close()
}

func tokenOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestRemoteWorkerWithItsOwnCredential: with --nats-workers, a worker
// connects with its own token (--nats-token-file) and its restricted
// permissions suffice to take a job and send its record, large artifact
// (an object) included; serve generates no shared token then.
func TestRemoteWorkerWithItsOwnCredential(t *testing.T) {
	apiStore, workerStore, ws, dir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	token := "worker-one-secret-token"
	sum := sha256.Sum256([]byte(token))
	workers, tokenFile := filepath.Join(dir, "workers"), filepath.Join(dir, "token")
	if err := os.WriteFile(workers, []byte("sha256:"+hex.EncodeToString(sum[:])+" host-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, natsAddr := freeAddr(t), freeAddr(t)
	startServe(t, addr, "--store-dir", apiStore, "--no-workers", "--nats-listen", natsAddr, "--nats-workers", workers,
		"--ack-wait", "2s", "--default-backend", "local_process", "--unsafe-local-process")
	if _, err := os.Stat(filepath.Join(apiStore, "nats", "token")); err == nil {
		t.Error("serve generated a shared token beside --nats-workers")
	}
	w := exec.Command(binary, "worker", "--nats", "nats://"+natsAddr, "--nats-token-file", tokenFile, "--store-dir", workerStore,
		"--log-level", "warn", "--workspace-root", os.TempDir(), "--default-backend", "local_process", "--unsafe-local-process")
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Kill(); w.Wait() })
	c := client.New("http://"+addr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acc, err := c.Submit(ctx, remoteRequest(t, ws, []string{"sh", "-c", "echo hi; mkdir -p out; head -c 300000 /dev/urandom > out/big.bin"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, acc.JobID, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.Status != job.StatusCompleted || res.Stdout.Text != "hi\n" {
		t.Fatalf("result = %s %q %+v, want completed with %q", res.Status, res.Stdout.Text, res.Error, "hi\n")
	}
	if fi, err := os.Stat(filepath.Join(apiStore, "runs", acc.JobID, "artifacts", "out", "big.bin")); err != nil || fi.Size() != 300000 {
		t.Errorf("artifact on the API node: %v", err)
	}
}
