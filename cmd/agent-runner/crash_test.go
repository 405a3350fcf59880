package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
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

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startServer(t *testing.T, store, addr string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"serve", "--addr", addr, "--store-dir", store, "--workers", "2", "--ack-wait", "2s", "--log-level", "warn", "--workspace-root", os.TempDir(),
		"--default-backend", "local_process", "--unsafe-local-process"}, extra...) // queue semantics; local_process children die with the server (PDEATHSIG)
	cmd := exec.Command(binary, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := client.New("http://"+addr, "")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := c.Get(context.Background(), "job_probe"); err != nil && strings.Contains(err.Error(), "job.not_found") {
			return cmd
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("server did not come up")
		}
	}
}

// TestCrashRestartLosesNoJob kills the server with SIGKILL while jobs are
// queued and running, restarts it on the same store and checks every
// accepted job reaches a terminal result, with the interrupted ones run
// again (attempt 2) or finished as interrupted when they opted out.
func TestCrashRestartLosesNoJob(t *testing.T) {
	store := t.TempDir()
	ws := t.TempDir()
	addr := freeAddr(t)
	srv := startServer(t, store, addr)
	c := client.New("http://"+addr, "")
	ctx := context.Background()
	mk := func(argv []string, onInterrupt string) []byte {
		req := map[string]any{
			"workspace": map[string]any{"path": ws},
			"command":   map[string]any{"argv": argv},
			"policy":    map[string]any{"allowed_commands": []string{argv[0]}},
		}
		if onInterrupt != "" {
			req["on_interrupt"] = onInterrupt
		}
		b, _ := json.Marshal(req)
		return b
	}
	var ids []string
	retry, _ := c.Submit(ctx, mk([]string{"sleep", "2"}, ""))
	noRetry, _ := c.Submit(ctx, mk([]string{"sleep", "2.1"}, "fail"))
	ids = append(ids, retry.JobID, noRetry.JobID)
	for i := 0; i < 6; i++ {
		acc, err := c.Submit(ctx, mk([]string{"echo", fmt.Sprint("queued-", i)}, ""))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, acc.JobID)
	}
	// Wait until both sleepers run, then kill the server outright.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a, _ := c.Get(ctx, retry.JobID)
		b, _ := c.Get(ctx, noRetry.JobID)
		if a.Status == job.StatusRunning && b.Status == job.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleepers never ran: %s %s", a.Status, b.Status)
		}
	}
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()

	srv = startServer(t, store, addr)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, id := range ids {
		res, err := c.Wait(wctx, id, 50*time.Millisecond)
		if err != nil {
			t.Fatalf("job %s never finished after the restart: %v", id, err)
		}
		switch id {
		case retry.JobID:
			if res.Status != job.StatusCompleted || res.Attempt != 2 {
				t.Errorf("interrupted job = %s attempt %d, want completed on attempt 2", res.Status, res.Attempt)
			}
		case noRetry.JobID:
			if res.Status != job.StatusFailed || res.Error == nil || res.Error.Code != job.CodeRunInterrupted {
				t.Errorf("opted-out job = %s %+v, want failed run.interrupted", res.Status, res.Error)
			}
		default:
			if res.Status != job.StatusCompleted || !strings.HasPrefix(res.Stdout.Text, "queued-") {
				t.Errorf("queued job = %s %q", res.Status, res.Stdout.Text)
			}
		}
	}
	runs, _ := os.ReadDir(filepath.Join(store, "runs"))
	if len(runs) != len(ids) {
		t.Errorf("%d run records, want %d", len(runs), len(ids))
	}
}
