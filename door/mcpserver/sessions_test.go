package mcpserver_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/door/mcpserver"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// bearer adds a bearer token to every request of the MCP client.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// sessionTools serves the tools with a real session service on
// local_process; Authorize grants the sessions scope to token "ok" only.
// It returns a client session holding token and the approved workspace.
func sessionTools(t *testing.T, token string) (*mcp.ClientSession, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "approved")
	ws := filepath.Join(root, "repo")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello over mcp\n"), 0o644)
	set := backend.Set{"local_process": localprocess.Backend{}}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", Backends: set})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.OpenRecords(filepath.Join(dir, "store", store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	roots := &workspaceroot.Roots{Dirs: []string{root}}
	s, err := session.New(session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: "local_process", UnsafeLocalProcess: true, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var mu sync.Mutex
	var scopes []string
	srv := mcpserver.New(mcpserver.Config{Backend: "local_process", WorkspaceRoots: roots.Dirs, Sessions: s,
		Authorize: func(call *mcp.CallToolRequest, scope string) error {
			mu.Lock()
			scopes = append(scopes, scope)
			mu.Unlock()
			if call.Extra == nil || call.Extra.Header.Get("Authorization") != "Bearer ok" {
				return job.Errorf(job.CodeForbidden, "token lacks the %q scope", scope).With("scope", scope)
			}
			return nil
		}})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(scopes) == 0 {
			t.Errorf("Authorize was never called")
		}
		for _, sc := range scopes {
			if sc != auth.ScopeSessions {
				t.Errorf("Authorize scope = %q, want %q", sc, auth.ScopeSessions)
			}
		}
	})
	return cs, ws
}

// TestSessionTools: create from an approved workspace, exec (state
// kept), write and read files (text and bytes), list files and
// sandboxes, pause (an exec refused), resume, set the timeout, destroy,
// through the SDK client.
func TestSessionTools(t *testing.T) {
	cs, ws := sessionTools(t, "ok")
	out, isErr, text := call(t, cs, "sandbox.create", map[string]any{"id": "m-1", "workspace_path": ws, "timeout_s": 600, "metadata": map[string]any{"owner": "mcp"}})
	if isErr || out["state"] != "running" || out["id"] != "m-1" {
		t.Fatalf("sandbox.create = %s", text)
	}
	out, isErr, text = call(t, cs, "sandbox.write_file", map[string]any{"sandbox_id": "m-1", "path": "d/note.txt", "content": "written over mcp\n"})
	if isErr || out["size_bytes"] != float64(17) {
		t.Fatalf("sandbox.write_file = %s", text)
	}
	out, isErr, text = call(t, cs, "sandbox.exec", map[string]any{"sandbox_id": "m-1", "argv": []string{"cat", "hello.txt", "d/note.txt"}})
	if isErr || out["stdout"] != "hello over mcp\nwritten over mcp\n" || out["exit_code"] != float64(0) || out["run_id"] != "m-1.exec-1" {
		t.Fatalf("sandbox.exec = %s", text)
	}
	bin := []byte{0, 0xff, 0xfe, 'x'}
	if _, isErr, text = call(t, cs, "sandbox.write_file", map[string]any{"sandbox_id": "m-1", "path": "bin", "base64": base64.StdEncoding.EncodeToString(bin), "mode": "600"}); isErr {
		t.Fatalf("sandbox.write_file(base64) = %s", text)
	}
	out, _, text = call(t, cs, "sandbox.read_file", map[string]any{"sandbox_id": "m-1", "path": "bin"})
	if out["base64"] != base64.StdEncoding.EncodeToString(bin) || out["content"] != nil || out["size_bytes"] != float64(4) {
		t.Errorf("sandbox.read_file(bin) = %s", text)
	}
	out, _, text = call(t, cs, "sandbox.read_file", map[string]any{"sandbox_id": "m-1", "path": "hello.txt"})
	if out["content"] != "hello over mcp\n" {
		t.Errorf("sandbox.read_file(hello.txt) = %s", text)
	}
	out, isErr, text = call(t, cs, "sandbox.list_files", map[string]any{"sandbox_id": "m-1", "path": "d"})
	if entries, _ := out["entries"].([]any); isErr || len(entries) != 1 || entries[0].(map[string]any)["path"] != "d/note.txt" {
		t.Errorf("sandbox.list_files(d) = %s", text)
	}
	out, isErr, text = call(t, cs, "sandbox.list", map[string]any{"metadata": map[string]any{"owner": "mcp"}})
	if list, _ := out["sandboxes"].([]any); isErr || len(list) != 1 || list[0].(map[string]any)["id"] != "m-1" {
		t.Errorf("sandbox.list(owner=mcp) = %s", text)
	}
	out, _, text = call(t, cs, "sandbox.list", map[string]any{"state": "paused"})
	if list, _ := out["sandboxes"].([]any); len(list) != 0 {
		t.Errorf("sandbox.list(paused) before a pause = %s", text)
	}
	out, isErr, text = call(t, cs, "sandbox.pause", map[string]any{"sandbox_id": "m-1"})
	if isErr || out["state"] != "paused" {
		t.Fatalf("sandbox.pause = %s", text)
	}
	if _, isErr, text = call(t, cs, "sandbox.exec", map[string]any{"sandbox_id": "m-1", "argv": []string{"true"}}); !isErr || !strings.Contains(text, "session.not_running") {
		t.Errorf("sandbox.exec while paused = %s, want session.not_running", text)
	}
	out, isErr, text = call(t, cs, "sandbox.resume", map[string]any{"sandbox_id": "m-1"})
	if isErr || out["state"] != "running" {
		t.Fatalf("sandbox.resume = %s", text)
	}
	out, isErr, text = call(t, cs, "sandbox.set_timeout", map[string]any{"sandbox_id": "m-1", "timeout_s": 120})
	if isErr || out["timeout_s"] != float64(120) {
		t.Fatalf("sandbox.set_timeout = %s", text)
	}
	out, isErr, text = call(t, cs, "sandbox.destroy", map[string]any{"sandbox_id": "m-1"})
	if isErr || out["state"] != "stopped" || out["execs"] != float64(1) {
		t.Fatalf("sandbox.destroy = %s", text)
	}
}

// TestSessionToolErrors: refusals and the service's errors are tool
// errors in the stable shape.
func TestSessionToolErrors(t *testing.T) {
	cs, _ := sessionTools(t, "ok")
	if _, isErr, text := call(t, cs, "sandbox.create", map[string]any{"id": "e-1"}); isErr {
		t.Fatalf("sandbox.create = %s", text)
	}
	outside := t.TempDir()
	for _, tc := range []struct {
		tool string
		args map[string]any
		want job.Code
	}{
		{"sandbox.create", map[string]any{"workspace_path": outside}, job.CodePathEscape},
		{"sandbox.create", map[string]any{"backend": "linux_sandbox"}, job.CodeInvalidRequest},
		{"sandbox.create", map[string]any{"policy": map[string]any{"allow_shell": true}}, job.CodeShellDenied},
		{"sandbox.create", map[string]any{"id": "e-1", "timeout_s": 5}, job.CodeJobConflict},
		{"sandbox.exec", map[string]any{"sandbox_id": "e-1", "argv": []string{"/bin/sh", "-c", "true"}}, job.CodeShellDenied},
		{"sandbox.exec", map[string]any{"sandbox_id": "e-1", "argv": []string{}}, job.CodeInvalidRequest},
		{"sandbox.exec", map[string]any{"sandbox_id": "none", "argv": []string{"true"}}, job.CodeJobNotFound},
		{"sandbox.exec", map[string]any{"argv": []string{"true"}}, job.CodeInvalidRequest},
		{"sandbox.read_file", map[string]any{"sandbox_id": "e-1", "path": "../../etc/passwd"}, job.CodePathEscape},
		{"sandbox.read_file", map[string]any{"sandbox_id": "e-1", "path": "missing"}, job.CodeJobNotFound},
		{"sandbox.write_file", map[string]any{"sandbox_id": "e-1", "path": "x", "base64": "not base64!"}, job.CodeInvalidRequest},
		{"sandbox.write_file", map[string]any{"sandbox_id": "e-1", "path": "x", "mode": "999"}, job.CodeInvalidRequest},
		{"sandbox.destroy", map[string]any{"sandbox_id": "none"}, job.CodeJobNotFound},
	} {
		out, isErr, text := call(t, cs, tc.tool, tc.args)
		if got := errorCode(out); !isErr || got != tc.want {
			t.Errorf("%s(%v) = %s, want a tool error %s", tc.tool, tc.args, text, tc.want)
		}
	}
}

// TestSessionToolsNeedScope: a caller without the sessions scope gets
// auth.forbidden from every kept-sandbox tool.
func TestSessionToolsNeedScope(t *testing.T) {
	cs, ws := sessionTools(t, "submit-only")
	var got []string
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"sandbox.create", map[string]any{"workspace_path": ws}},
		{"sandbox.exec", map[string]any{"sandbox_id": "x", "argv": []string{"true"}}},
		{"sandbox.read_file", map[string]any{"sandbox_id": "x", "path": "a"}},
		{"sandbox.write_file", map[string]any{"sandbox_id": "x", "path": "a", "content": "a"}},
		{"sandbox.destroy", map[string]any{"sandbox_id": "x"}},
	} {
		out, _, _ := call(t, cs, tc.tool, tc.args)
		got = append(got, string(errorCode(out)))
	}
	want := []string{"auth.forbidden", "auth.forbidden", "auth.forbidden", "auth.forbidden", "auth.forbidden"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool error codes without the scope (-want +got):\n%s", diff)
	}
}

func errorCode(out map[string]any) job.Code {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return job.Code(c)
}
