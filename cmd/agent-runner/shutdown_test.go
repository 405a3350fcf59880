package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// lockedBuffer is a process's stderr, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	os.Stderr.Write(p)
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// exitsWithin waits for cmd to exit and returns its exit code.
func exitsWithin(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("serve did not exit within %s", d)
		return 0
	}
}

// TestSecondSignalStopsNowAndJobRunsAgain: the first SIGTERM says what it
// waits for (the job and the grace); the second makes serve exit at once,
// non-zero, killing the job without recording it canceled; serve
// restarted on the same store runs it again as attempt 2.
func TestSecondSignalStopsNowAndJobRunsAgain(t *testing.T) {
	store := t.TempDir()
	ws := t.TempDir()
	addr := freeAddr(t)
	var stderr lockedBuffer
	srv := exec.Command(binary, "serve", "--addr", addr, "--store-dir", store, "--workers", "1", "--ack-wait", "2s",
		"--shutdown-grace", "30s", "--log-level", "warn", "--workspace-root", os.TempDir(),
		"--default-backend", "local_process", "--unsafe-local-process")
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	c := client.New("http://"+addr, "")
	ctx := context.Background()
	waitFor(t, 15*time.Second, "serve to come up", func() bool {
		_, err := c.Get(ctx, "job_probe")
		return job.CodeOf(err) == job.CodeJobNotFound
	})
	body, _ := json.Marshal(map[string]any{
		"workspace": map[string]any{"path": ws},
		"command":   map[string]any{"argv": []string{"sleep", "60"}},
		"policy":    map[string]any{"allowed_commands": []string{"sleep"}},
	})
	acc, err := c.Submit(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job to run", func() bool {
		st, _ := c.Get(ctx, acc.JobID)
		return st.Status == job.StatusRunning
	})

	srv.Process.Signal(syscall.SIGTERM)
	waitFor(t, 10*time.Second, "the shutdown message", func() bool {
		s := stderr.String()
		return strings.Contains(s, "waiting up to 30s for 1 running job: "+acc.JobID) && strings.Contains(s, "send the signal again")
	})
	srv.Process.Signal(syscall.SIGTERM)
	if code := exitsWithin(t, srv, 5*time.Second); code == 0 {
		t.Error("serve stopped by a second signal exited 0")
	}
	run := filepath.Join(store, "runs", acc.JobID)
	if _, err := os.Stat(filepath.Join(run, "result.json")); err == nil {
		b, _ := os.ReadFile(filepath.Join(run, "result.json"))
		t.Errorf("the killed job has a result: %s", b)
	}
	var rec struct {
		Status  job.Status `json:"status"`
		Attempt int        `json:"attempt"`
	}
	b, err := os.ReadFile(filepath.Join(run, "status.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Status != job.StatusRunning || rec.Attempt != 1 {
		t.Errorf("the killed job's status.json = %s (%v), want running on attempt 1", b, err)
	}

	srv = startServer(t, store, addr)
	defer srv.Process.Kill()
	waitFor(t, 20*time.Second, "the job to run again", func() bool {
		st, _ := c.Get(ctx, acc.JobID)
		return st.Status == job.StatusRunning && st.Attempt == 2
	})
	srv.Process.Signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	srv.Process.Signal(syscall.SIGTERM)
	exitsWithin(t, srv, 5*time.Second)
}
