package main

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondServeOnOneStoreRefused: a store has one owning process; a
// second serve on it exits non-zero naming the first's pid and command.
func TestSecondServeOnOneStoreRefused(t *testing.T) {
	store := sandboxTempDir(t)
	first := startServe(t, freeAddr(t), "--store-dir", store, "--workers", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, binary, "serve", "--addr", freeAddr(t), "--log-level", "warn", "--store-dir", store)
	out, err := second.CombinedOutput()
	if err == nil || second.ProcessState.ExitCode() <= 0 {
		t.Fatalf("second serve on one store = %v, want a non-zero exit\n%s", err, out)
	}
	pid := "pid " + strconv.Itoa(first.Process.Pid)
	for _, want := range []string{"job.conflict", pid, "serve"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second serve's output lacks %q:\n%s", want, out)
		}
	}
}
