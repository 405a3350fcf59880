package anthropicmock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestClaudeCodeWritesFileThroughProxy runs the real Claude Code CLI on the
// host as a task's agent will run behind the egress gateway: the API under
// its real name, api.anthropic.com, reached only through an HTTPS proxy
// that routes it to the mock, whose CA the CLI trusts through
// NODE_EXTRA_CA_CERTS, and a placeholder API key. The argv is task/agentrun's
// default command for Claude Code.
func TestClaudeCodeWritesFileThroughProxy(t *testing.T) {
	cli := CLIForTest(t)
	const (
		key    = "agent-runner-placeholder-ANTHROPIC_API_KEY"
		model  = "claude-sonnet-4-5-20250929"
		toolID = "toolu_01MockWrite"
		final  = "Created hello.txt."
	)
	work := t.TempDir()
	target := filepath.Join(work, "hello.txt")
	content := "hi from the mock\n"
	mock, err := New(Config{
		APIKey: key,
		Script: Script{
			{Blocks: []Block{
				Text("I'll create the file."),
				ToolUse(toolID, "Write", map[string]string{"file_path": target, "content": content}),
			}},
			{Blocks: []Block{Text(final)}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mock.Close)
	proxy := startConnectProxy(t, map[string]string{"api.anthropic.com:443": mock.Addr()})
	home, tmp := t.TempDir(), t.TempDir()
	ca := filepath.Join(tmp, "ca.pem")
	if err := os.WriteFile(ca, mock.CAPEM(), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := append(cli[1:], "--print", "--verbose", "--output-format", "stream-json",
		"--model", model, "--dangerously-skip-permissions", "create hello.txt containing hi")
	cmd := exec.CommandContext(ctx, cli[0], args...)
	cmd.Dir = work
	cmd.Env = ClaudeCodeEnv(home, tmp, proxy.url(), ca, key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr // stdin is /dev/null: an open pipe costs a 3 s wait
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(cmd.Args, " "), err, stderr.String(), stdout.String())
	}

	got, err := os.ReadFile(target)
	if err != nil || string(got) != content {
		t.Errorf("hello.txt = %q, %v; want %q, the Write tool_use's content", got, err, content)
	}

	result := lastResult(t, stdout.Bytes())
	wantResult := streamResult{Type: "result", Subtype: "success", IsError: false, Result: final, NumTurns: 2, PermissionDenials: []json.RawMessage{}}
	if diff := cmp.Diff(wantResult, result); diff != "" {
		t.Errorf("final stream-json line (-want +got):\n%s", diff)
	}

	var messages []Request
	for _, r := range mock.Requests() {
		if got := r.Header.Get("X-Api-Key"); got != key {
			t.Errorf("%s %s: x-api-key = %q, want %q", r.Method, r.Path, got, key)
		}
		if r.Path == "/v1/messages" {
			messages = append(messages, r)
		}
	}
	if len(messages) != 2 {
		t.Fatalf("POST /v1/messages requests = %d, want 2 (the tool_use turn and the final turn)", len(messages))
	}
	var second struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(messages[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	if second.Model != model || !second.Stream {
		t.Errorf("second request: model %q stream %v, want %q true", second.Model, second.Stream, model)
	}
	last := second.Messages[len(second.Messages)-1]
	if last.Role != "user" || !bytes.Contains(last.Content, []byte(`"tool_use_id":"`+toolID+`"`)) {
		t.Errorf("second request's last message = %s %s, want the user's tool_result for %s", last.Role, last.Content, toolID)
	}

	for _, target := range proxy.asked() {
		if target != "CONNECT api.anthropic.com:443" {
			t.Errorf("the CLI asked the proxy for %q; only CONNECT api.anthropic.com:443 was expected", target)
		}
	}
}

// streamResult is the part of stream-json's final line the test checks.
type streamResult struct {
	Type              string            `json:"type"`
	Subtype           string            `json:"subtype"`
	IsError           bool              `json:"is_error"`
	Result            string            `json:"result"`
	NumTurns          int               `json:"num_turns"`
	PermissionDenials []json.RawMessage `json:"permission_denials"`
}

// lastResult checks that every stream-json line is a JSON object and returns
// the last one, which must be the result.
func lastResult(t *testing.T, out []byte) streamResult {
	t.Helper()
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("stream-json line is not JSON: %s", sc.Bytes())
		}
		last = bytes.Clone(sc.Bytes())
	}
	var r streamResult
	if err := json.Unmarshal(last, &r); err != nil {
		t.Fatalf("last stream-json line %q: %v", last, err)
	}
	return r
}
