package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// cliEnv is cli with env added to the binary's environment.
func cliEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runCLI(t, "", env, args...)
}

// privateParent returns a directory whose parent only root may search
// (0700), like a store under /root.
func privateParent(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runSandboxJob runs body with `agent-runner run` and extra flags and env.
func runSandboxJob(t *testing.T, body string, env []string, flags ...string) job.Result {
	t.Helper()
	out, stderr, code := cliEnv(t, env, append([]string{"run", "--request", requestFile(t, body)}, flags...)...)
	var res job.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("run %v: exit %d %s %s", flags, code, out, stderr)
	}
	return res
}

// Regression: a store under a 0700 parent failed every linux_sandbox job
// at setup (the sandbox uid could not search the parent).
func TestSandboxStoreUnderPrivateParent(t *testing.T) {
	sandboxUsable(t)
	if os.Getuid() != 0 {
		t.Skip("an unprivileged runner's sandbox has its own uid")
	}
	store := filepath.Join(privateParent(t), "store")
	ws := privateParent(t)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("private\n"), 0o644)
	body := `{"workspace":{"path":"` + ws + `"},"command":{"argv":["/bin/cat","a.txt"]},"policy":{"allowed_commands":["cat"]},"backend":{"kind":"linux_sandbox"}}`
	res := runSandboxJob(t, body, nil, "--store-dir", store)
	if res.Status != job.StatusCompleted || res.Stdout.Text != "private\n" {
		t.Errorf("job with its store under a 0700 parent = %s %+v stdout %q, want completed", res.Status, res.Error, res.Stdout.Text)
	}
}

// TestSandboxReadOnlyFlag: --sandbox-ro makes a directory outside the
// toolchain (here under a private parent, as /root/.nvm is) visible at
// the same path, read-only; without it the sandbox does not see it.
func TestSandboxReadOnlyFlag(t *testing.T) {
	sandboxUsable(t)
	tools := filepath.Join(privateParent(t), "tools")
	os.Mkdir(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "lib.txt"), []byte("from the tools dir"), 0o644)
	store := sandboxTempDir(t)
	script := `import os
try:
    print(open("` + tools + `/lib.txt").read())
except OSError as e:
    print("UNSEEN", type(e).__name__)
try:
    open("` + tools + `/new.txt", "w")
    print("WROTE")
except OSError as e:
    print("READ-ONLY", type(e).__name__)`
	argv, _ := json.Marshal([]string{"/usr/bin/python3", "-c", script})
	body := sandboxRequest(t, string(argv), `["python3"]`, "")
	res := runSandboxJob(t, body, nil, "--store-dir", store, "--sandbox-ro", tools)
	if got := res.Stdout.Text; res.Status != job.StatusCompleted || !strings.HasPrefix(got, "from the tools dir\nREAD-ONLY") {
		t.Errorf("with --sandbox-ro: %s %+v stdout %q, want the file read and the write refused", res.Status, res.Error, got)
	}
	if _, err := os.Stat(filepath.Join(tools, "new.txt")); err == nil {
		t.Errorf("the sandbox wrote into a --sandbox-ro directory")
	}
	res = runSandboxJob(t, body, nil, "--store-dir", store)
	if got := res.Stdout.Text; !strings.HasPrefix(got, "UNSEEN") {
		t.Errorf("without --sandbox-ro: stdout %q, want the directory unseen", got)
	}
	_, stderr, code := cli(t, "", "run", "--request", requestFile(t, body), "--store-dir", store, "--sandbox-ro", filepath.Join(tools, "missing"))
	if code != exitInvalid || !strings.Contains(stderr, "--sandbox-ro "+filepath.Join(tools, "missing")) {
		t.Errorf("--sandbox-ro of a missing directory = exit %d %q, want a usage error naming the flag", code, stderr)
	}
}

// TestSandboxBareNameIgnoresTheServersPath: a bare `python3` resolves on
// the sandbox's PATH inside its view even when the runner's own PATH has a
// shim directory first; --sandbox-ro and --sandbox-path are what let the
// shim in.
func TestSandboxBareNameIgnoresTheServersPath(t *testing.T) {
	sandboxUsable(t)
	prefix := filepath.Join(privateParent(t), "pyenv")
	shims := filepath.Join(prefix, "shims")
	os.MkdirAll(shims, 0o755)
	// A python shim: under allow_shell false (this request's) no process
	// may run a shell, a #!/bin/sh script's interpreter included.
	os.WriteFile(filepath.Join(shims, "python3"), []byte("#!/usr/bin/python3\nprint('SHIM')\n"), 0o755)
	env := []string{"PATH=" + shims + ":" + os.Getenv("PATH")}
	store := sandboxTempDir(t)
	body := sandboxRequest(t, `["python3","-c","import sys; print(sys.executable)"]`, `["python3"]`, "")
	res := runSandboxJob(t, body, env, "--store-dir", store)
	if res.Status != job.StatusCompleted || strings.Contains(res.Stdout.Text, "SHIM") || !strings.HasPrefix(res.Stdout.Text, "/usr/") {
		t.Errorf("bare python3 with a shim first on the runner's PATH = %s %+v stdout %q, want the sandbox's /usr python", res.Status, res.Error, res.Stdout.Text)
	}
	res = runSandboxJob(t, body, env, "--store-dir", store, "--sandbox-ro", prefix, "--sandbox-path", shims+":/usr/bin:/bin")
	if res.Status != job.StatusCompleted || res.Stdout.Text != "SHIM\n" {
		t.Errorf("with the shims in the view and on the sandbox PATH = %s %+v stdout %q, want the shim", res.Status, res.Error, res.Stdout.Text)
	}
	abs := sandboxRequest(t, `["`+filepath.Join(shims, "python3")+`"]`, `["python3"]`, "")
	res = runSandboxJob(t, abs, env, "--store-dir", store)
	if res.Status != job.StatusPolicyDenied || res.Error.Code != job.CodeCommandDenied || !strings.Contains(res.Error.Message, "--sandbox-ro "+prefix) {
		t.Errorf("a program outside the view = %s %+v, want policy_denied %s naming --sandbox-ro %s", res.Status, res.Error, job.CodeCommandDenied, prefix)
	}
}

// TestTaskAgentOutsideTheView: a task whose agent.command is a bare name
// that only serve's PATH finds, outside the sandbox view, is refused at
// submit, before anything is cloned, with the flag that would let it in.
func TestTaskAgentOutsideTheView(t *testing.T) {
	sandboxUsable(t)
	home := privateParent(t)
	bin := filepath.Join(home, ".local", "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "myagent"), []byte("#!/bin/sh\necho agent\n"), 0o755)
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	addr := freeAddr(t)
	store := filepath.Join(privateParent(t), "store")
	startServeEnv(t, addr, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, "--store-dir", store)
	manifest := filepath.Join(t.TempDir(), "task.yaml")
	os.WriteFile(manifest, []byte(`version: "1"
kind: Task
metadata: {id: outside-task, name: outside}
repository: {url: "`+origin+`", branch: main}
claude: {prompt: "edit"}
agent: {command: ["myagent"]}
`), 0o644)
	_, stderr, code := cli(t, "", "task", "submit", manifest, "--server", "http://"+addr)
	var got struct{ Error job.Error }
	json.Unmarshal([]byte(stderr), &got)
	want := `agent command "myagent": ` + filepath.Join(bin, "myagent") + " is outside the sandbox view"
	if msg := got.Error.Message; code == 0 || got.Error.Code != job.CodeInvalidRequest || !strings.HasPrefix(msg, want) || !strings.Contains(msg, "add --sandbox-ro "+filepath.Join(home, ".local")) {
		t.Errorf("task submit = exit %d %q, want %s: %s ... add --sandbox-ro %s", code, stderr, job.CodeInvalidRequest, want, filepath.Join(home, ".local"))
	}
	if entries, _ := os.ReadDir(filepath.Join(store, "tasks", "outside-task")); len(entries) > 0 {
		t.Errorf("the refused task left a task directory: %v", entries)
	}
}
