package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// preservedTask runs, on a real serve, a task whose agent edits a file
// and exits 1 with failure_action preserve. It returns the store, the
// server URL and the task id.
func preservedTask(t *testing.T) (string, string, string) {
	t.Helper()
	origin := tasktest.Origin(t, map[string]string{"src/a.txt": "one\n"})
	base := filepath.Dir(origin)
	store := filepath.Join(base, "store")
	addr := freeAddr(t)
	// Tasks on the sandbox (jobs stay on local_process): the shell's
	// view and network are the sandbox's.
	srv := startServer(t, store, addr, "--task-backend", "linux_sandbox")
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	server := "http://" + addr
	manifest := filepath.Join(base, "task.yaml")
	os.WriteFile(manifest, []byte(`version: "1"
kind: Task
metadata: {id: kept, name: preserved}
repository: {url: "`+origin+`", branch: main, subpath: src}
claude: {prompt: "try"}
agent: {command: ["/bin/sh", "-c", "echo half-done > a.txt; exit 1"]}
vm: {memory: 256M, cpus: 1, disk: 64M}
lifecycle: {failure_action: preserve}
`), 0o644)
	// The size-limited workspace is a loop mount; unmount it before the
	// temporary directory goes.
	t.Cleanup(func() { stage.RemoveWorkspace(stage.Layout{Dir: filepath.Join(store, "tasks", "kept")}) })
	if _, stderr, code := cli(t, "", "task", "submit", manifest, "--server", server); code != 0 {
		t.Fatalf("submit: %s", stderr)
	}
	out, _, _ := cli(t, "", "task", "status", "--watch", "kept", "--server", server)
	if !strings.Contains(out, `"state": "failed_preserved"`) {
		t.Fatalf("task = %s", out)
	}
	if !strings.Contains(out, `"backend": "linux_sandbox"`) {
		t.Skipf("tasks fell back from linux_sandbox on this host: %s", out)
	}
	if os.Geteuid() == 0 && !strings.Contains(out, `"disk"`) {
		t.Errorf("vm.disk not enforced as root: %s", out)
	}
	return store, server, "kept"
}

// TestTaskShellAndDestroy: a shell over the preserved workspace sees the
// agent's edit in the subpath, can write to the workspace but not reach
// the network, and passes its exit status through; destroy removes the
// workspace and the shell is then refused.
func TestTaskShellAndDestroy(t *testing.T) {
	store, server, id := preservedTask(t)
	script := `pwd; cat a.txt; echo from-shell > new.txt
python3 -c '
import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2); print("NET-REACHED")
except OSError as e:
    print("net refused", type(e).__name__)
'
test -n "$AGENT_TASK_TOKEN" && echo TOKEN-LEAKED
exit 7
`
	out, stderr, code := cli(t, script, "task", "shell", id, "--store-dir", store)
	if code != 7 {
		t.Fatalf("shell exit = %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"/workspace/src\n", "half-done\n", "net refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("shell output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "NET-REACHED") || strings.Contains(out, "TOKEN-LEAKED") {
		t.Errorf("shell output:\n%s", out)
	}
	inbox := filepath.Join(store, "tasks", id, "inbox")
	if b, _ := os.ReadFile(filepath.Join(inbox, "src", "new.txt")); string(b) != "from-shell\n" {
		t.Errorf("the shell's write = %q", b)
	}
	// A command instead of a shell.
	if out, _, code := cli(t, "", "task", "shell", id, "--store-dir", store, "--", "cat", "a.txt"); code != 0 || out != "half-done\n" {
		t.Errorf("task shell -- cat = %d %q", code, out)
	}
	// Errors.
	if _, stderr, code := cli(t, "", "task", "shell", "ghost", "--store-dir", store); code != exitInvalid || !strings.Contains(stderr, "job.not_found") {
		t.Errorf("unknown task = %d %s", code, stderr)
	}
	if _, stderr, code := cli(t, "", "task", "shell", id, "--store-dir", filepath.Join(store, "nope")); code != exitInvalid || !strings.Contains(stderr, "no task store") {
		t.Errorf("missing store = %d %s", code, stderr)
	}

	out, stderr, code = cli(t, "", "task", "destroy", id, "--server", server)
	if code != 0 || !strings.Contains(out, `"state": "failed_preserved"`) {
		t.Fatalf("destroy = %d %s %s", code, out, stderr)
	}
	if _, err := os.Stat(inbox); !os.IsNotExist(err) {
		t.Error("workspace survived destroy")
	}
	if l := (stage.Layout{Dir: filepath.Join(store, "tasks", id)}); stage.Mounted(l) {
		t.Error("workspace still mounted after destroy")
	}
	events, _ := os.ReadFile(filepath.Join(store, "tasks", id, "outbox", "progress", "events.jsonl"))
	if !strings.Contains(string(events), "workspace_destroyed") {
		t.Errorf("events.jsonl = %s", events)
	}
	if _, stderr, code := cli(t, "", "task", "shell", id, "--store-dir", store); code != exitInvalid || !strings.Contains(stderr, "no workspace left") {
		t.Errorf("shell after destroy = %d %s", code, stderr)
	}
	// The outbox stays readable.
	if out, _, code := cli(t, "", "task", "artifacts", id, "--server", server); code != 0 || !strings.Contains(out, "kept.patch") {
		t.Errorf("artifacts after destroy = %d %s", code, out)
	}
}

// TestTaskShellOnATerminal: with a terminal on stdin, the sandboxed shell
// gets its own pseudo-terminal as controlling terminal.
func TestTaskShellOnATerminal(t *testing.T) {
	store, _, id := preservedTask(t)
	p, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer p.master.Close()
	cmd := exec.Command(binary, "task", "shell", id, "--store-dir", store, "--", "/bin/sh")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.slave.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := p.master.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				close(read)
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	p.master.Write([]byte("tty && echo IS-A-TTY-$((40+2)); exit 5\n"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
			t.Errorf("exit = %v", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("interactive shell did not exit")
	}
	select {
	case <-read:
	case <-time.After(2 * time.Second):
	}
	if !strings.Contains(out.String(), "IS-A-TTY-42") {
		t.Errorf("terminal session:\n%q", out.String())
	}
}

// TestTaskShellNeverGetsTheUsersTerminal: with the user's terminal on
// stdin but output piped (no pty mode), the sandbox gets a pipe, so
// TIOCSTI cannot push keystrokes into the user's terminal.
func TestTaskShellNeverGetsTheUsersTerminal(t *testing.T) {
	store, _, id := preservedTask(t)
	p, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer p.master.Close()
	defer p.slave.Close()
	cmd := exec.Command(binary, "task", "shell", id, "--store-dir", store, "--", "/usr/bin/python3", "-c", `
import fcntl, os, termios
print("stdin isatty", os.isatty(0))
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("INJECTED")
except OSError as e:
    print("TIOCSTI refused", e.errno)
`)
	cmd.Stdin = p.slave
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("shell: %v %s", err, out)
	}
	if !strings.Contains(string(out), "stdin isatty False") || strings.Contains(string(out), "INJECTED") {
		t.Errorf("sandbox output:\n%s", out)
	}
}
