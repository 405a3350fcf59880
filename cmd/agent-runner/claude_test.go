package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/internal/anthropicmock"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestClaudeCodeTaskThroughTheEgressGateway is the main use case end to
// end: the real Claude Code CLI (from npm) as an agent task's agent on
// linux_sandbox, vm.network_mode outbound to api.anthropic.com only, the
// API key from the operator's secrets file bound to that host. A mock of
// the Messages API stands in for api.anthropic.com (pinned with
// --egress-resolve, trusted with --egress-upstream-ca) and scripts one
// Write tool call. The task completes, its patch holds the file, the mock
// got the real key, and the sandbox only ever held a placeholder.
func TestClaudeCodeTaskThroughTheEgressGateway(t *testing.T) {
	sandboxUsable(t)
	if os.Getuid() != 0 {
		t.Skip("the mock stands in for api.anthropic.com on port 443 of a loopback address, which needs root")
	}
	// The CLI must lie in the sandbox's view, and /opt is part of it.
	if os.Getenv("AGENT_RUNNER_TEST_CACHE") == "" {
		t.Setenv("AGENT_RUNNER_TEST_CACHE", "/opt/agent-runner-test")
	}
	claude := anthropicmock.CLIForTest(t)
	for _, p := range []string{"/opt/agent-runner-test", os.Getenv("AGENT_RUNNER_TEST_CACHE")} {
		os.Chmod(p, 0o755)
	}
	const realKey = "sk-ant-test-REAL-KEY-7d1c9a0f3b"
	mock, err := anthropicmock.New(anthropicmock.Config{
		Listen: "127.0.0.44:443",
		APIKey: realKey,
		Script: anthropicmock.Script{
			{Blocks: []anthropicmock.Block{anthropicmock.ToolUse("toolu_01", "Write", map[string]string{"file_path": "/workspace/hello.txt", "content": "hi from claude\n"})}},
			{Blocks: []anthropicmock.Block{anthropicmock.Text("Wrote hello.txt.")}},
		},
	})
	if err != nil {
		var errno syscall.Errno
		if ne, ok := err.(*net.OpError); ok && asErrno(ne.Err, &errno) && errno == syscall.EADDRINUSE {
			t.Skipf("port 443 of 127.0.0.44 is taken on this host: %v", err)
		}
		t.Fatal(err)
	}
	defer mock.Close()

	// The agent records its environment, then runs the CLI.
	script := "env > env-seen.txt\nexec " + shellQuote(claude) +
		" --print --verbose --output-format stream-json --model claude-sonnet-4-5-20250929 --dangerously-skip-permissions -- 'Create hello.txt saying hi'\n"
	origin := tasktest.Origin(t, map[string]string{"README.md": "demo\n", "run-claude.sh": script})
	base := filepath.Dir(origin)
	store := filepath.Join(base, "store")
	caFile := filepath.Join(base, "upstream-ca.pem")
	os.WriteFile(caFile, mock.CAPEM(), 0o644)
	secrets := filepath.Join(base, "secrets.yaml")
	os.WriteFile(secrets, []byte("secrets:\n  ANTHROPIC_API_KEY: {env: AR_TEST_ANTHROPIC_KEY, hosts: [api.anthropic.com]}\n"), 0o600)
	addr := freeAddr(t)
	srv := startServeEnv(t, addr, []string{"AR_TEST_ANTHROPIC_KEY=" + realKey},
		"--store-dir", store, "--workspace-root", base, "--secrets-file", secrets,
		"--egress-allow", "api.anthropic.com", "--egress-resolve", "api.anthropic.com:443:127.0.0.44", "--egress-upstream-ca", caFile)
	_ = srv
	server := "http://" + addr
	manifest := filepath.Join(base, "task.yaml")
	os.WriteFile(manifest, []byte(`version: "1"
kind: Task
metadata: {id: claude-e2e, name: Claude Code through the gateway}
repository: {url: "`+origin+`", branch: main}
claude: {prompt: "Create hello.txt saying hi"}
agent:
  command: ["/bin/sh", "run-claude.sh"]
  env: {CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", IS_SANDBOX: "1"}
vm: {memory: 4G, network_mode: outbound, allowed_hosts: [api.anthropic.com]}
lifecycle: {timeout: 5m}
secrets: [{name: ANTHROPIC_API_KEY}]
`), 0o644)
	if out, stderr, code := cli(t, "", "task", "submit", manifest, "--server", server); code != 0 {
		t.Fatalf("task submit = %d %s %s", code, out, stderr)
	}
	cli(t, "", "task", "status", "--watch", "claude-e2e", "--server", server)
	out, _, _ := cli(t, "", "task", "status", "claude-e2e", "--server", server)
	var st map[string]any
	json.Unmarshal([]byte(out), &st)
	taskDir := filepath.Join(store, "tasks", "claude-e2e")
	logs, _ := os.ReadFile(filepath.Join(taskDir, "outbox", "progress", "stdout.log"))
	errs, _ := os.ReadFile(filepath.Join(taskDir, "outbox", "progress", "stderr.log"))
	if st["state"] != "completed" {
		t.Fatalf("task = %s\nstdout:\n%s\nstderr:\n%s", out, logs, errs)
	}
	patch, _ := os.ReadFile(filepath.Join(taskDir, "outbox", "artifacts", "claude-e2e.patch"))
	if !bytes.Contains(patch, []byte("+hi from claude")) {
		t.Errorf("the patch lacks the file the agent wrote:\n%s", patch)
	}
	if !bytes.Contains(patch, []byte("+ANTHROPIC_API_KEY=agent-runner-placeholder-ANTHROPIC_API_KEY-")) {
		t.Errorf("the agent's environment did not hold the placeholder:\n%s", patch)
	}
	var sawKey bool
	for _, r := range mock.Requests() {
		if r.Path == "/v1/messages" && r.Header.Get("x-api-key") == realKey {
			sawKey = true
		}
	}
	if !sawKey {
		t.Errorf("the mock never received the real key in x-api-key: %+v", mock.Requests())
	}
	// The real value is nowhere in the store: not in the patch, logs,
	// events, metadata or the egress audit.
	filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(realKey)) {
				t.Errorf("the real key is in %s", p)
			}
		}
		return nil
	})
	var intercepted bool
	f, err := os.Open(filepath.Join(taskDir, "outbox", "progress", "egress.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var d egress.Decision
		json.Unmarshal(sc.Bytes(), &d)
		if d.Host == "api.anthropic.com" && d.Mode == egress.ModeIntercept && d.Allowed {
			intercepted = true
		}
		if d.Host != "api.anthropic.com" {
			t.Errorf("the agent reached for another host: %+v", d)
		}
	}
	if !intercepted {
		t.Error("egress.jsonl has no allowed, intercepted connection to api.anthropic.com")
	}
}

func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func asErrno(err error, target *syscall.Errno) bool {
	for err != nil {
		if e, ok := err.(syscall.Errno); ok {
			*target = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}
