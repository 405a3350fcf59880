package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

func sandboxUsable(t *testing.T) {
	t.Helper()
	store := t.TempDir()
	os.Chmod(filepath.Dir(store), 0o755)
	os.Chmod(store, 0o755)
	out, _, code := cli(t, "", "run", "--store-dir", store, "--request", requestFile(t, sandboxRequest(t, `["/bin/true"]`, `["true"]`, "")))
	var res job.Result
	json.Unmarshal([]byte(out), &res)
	if code != 0 || res.Status != job.StatusCompleted {
		t.Skipf("linux_sandbox is not usable here: %s %+v", res.Status, res.Error)
	}
}

func sandboxRequest(t *testing.T, argv, allowed, extra string) string {
	ws := t.TempDir()
	os.Chmod(filepath.Dir(ws), 0o755)
	os.Chmod(ws, 0o755)
	return `{"workspace":{"path":"` + ws + `"},"command":{"argv":` + argv + `},"policy":{"allowed_commands":` + allowed + `},"backend":{"kind":"linux_sandbox"}` + extra + `}`
}

// TestRunnerKilledLeavesNoSandboxedProcess SIGKILLs the CLI while its
// sandboxed job runs and checks that nothing from the sandbox survives.
func TestRunnerKilledLeavesNoSandboxedProcess(t *testing.T) {
	sandboxUsable(t)
	store := t.TempDir()
	os.Chmod(filepath.Dir(store), 0o755)
	os.Chmod(store, 0o755)
	marker := "survivor-" + filepath.Base(store)
	body := sandboxRequest(t, `["/usr/bin/python3","-c","import subprocess,time; subprocess.Popen(['/usr/bin/python3','-c','import time; time.sleep(300)','`+marker+`']); time.sleep(300)","`+marker+`"]`, `["python3"]`, "")
	cmd := exec.Command(binary, "run", "--store-dir", store, "--request", requestFile(t, body))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !processWith(marker); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the sandboxed job never started")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); processWith(marker); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a sandboxed process outlived its SIGKILLed runner")
		}
	}
}

func processWith(marker string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) && e.Name() != "self" {
			return true
		}
	}
	return false
}

func TestSandboxThroughThePipeline(t *testing.T) {
	sandboxUsable(t)
	store := t.TempDir()
	os.Chmod(filepath.Dir(store), 0o755)
	os.Chmod(store, 0o755)
	run := func(body string) job.Result {
		out, stderr, code := cli(t, "", "run", "--store-dir", store, "--request", requestFile(t, body))
		var res job.Result
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("run: %d %s", code, stderr)
		}
		return res
	}
	res := run(sandboxRequest(t, `["/usr/bin/python3","-c","open('out.txt','w').write('made in the sandbox')"]`, `["python3"]`, `,"limits":{"memory_mb":128,"max_processes":32}`))
	if res.Status != job.StatusCompleted || res.Enforcement == nil || len(res.Enforcement.NotEnforced) != 0 || res.Usage == nil || res.Usage.PeakMemoryBytes == 0 {
		t.Errorf("sandboxed job = %s enforcement %+v usage %+v", res.Status, res.Enforcement, res.Usage)
	}
	res = run(strings.Replace(sandboxRequest(t, `["/bin/true"]`, `["true"]`, ""), `"allowed_commands":["true"]`, `"allowed_commands":["true"],"network":"host"`, 1))
	if res.Status != job.StatusPolicyDenied || res.Error.Code != job.CodeNetworkDenied {
		t.Errorf("network host on linux_sandbox = %s %+v, want policy_denied %s", res.Status, res.Error, job.CodeNetworkDenied)
	}
	res = run(sandboxRequest(t, `["/usr/bin/python3","-c","x = bytearray(512 << 20); print(len(x))"]`, `["python3"]`, `,"limits":{"memory_mb":64}`))
	if res.Status != job.StatusFailed || res.Error.Code != job.CodeRunOOM || res.Termination.Reason != job.ReasonOOM {
		t.Errorf("memory bomb through the pipeline = %s %+v %+v, want failed run.oom_killed", res.Status, res.Error, res.Termination)
	}
}
