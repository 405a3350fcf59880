package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// startGuardedServe runs serve on local_process with a token file of
// lines (token -> scopes) and args, and waits for /health.
func startGuardedServe(t *testing.T, addr string, tokens map[string]string, args ...string) {
	t.Helper()
	var file string
	if len(tokens) > 0 {
		file = filepath.Join(t.TempDir(), "tokens")
		var b strings.Builder
		for tok, scopes := range tokens {
			b.WriteString(auth.Hash(tok) + " " + scopes + "\n")
		}
		os.WriteFile(file, []byte(b.String()), 0o600)
		args = append(args, "--token-file", file)
	}
	startServe(t, addr, append([]string{"--store-dir", t.TempDir(), "--workers", "1", "--default-backend", "local_process", "--unsafe-local-process"}, args...)...)
}

// TestServeClosesIdleAndUnauthorizedConnections opens 3500 connections
// to serve: 3000 make a /health request and stay idle (the server must
// close them after --idle-timeout), 500 are refused 401 (closed at once).
func TestServeClosesIdleAndUnauthorizedConnections(t *testing.T) {
	const idleN, n = 3000, 3500
	idle := 2 * time.Second
	addr := freeAddr(t)
	startGuardedServe(t, addr, map[string]string{"reader": "read"}, "--idle-timeout", idle.String(), "--max-conns-per-ip", "0")
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	var closedAt401, failures atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				failures.Add(1)
				return
			}
			conns[i], readers[i] = c, bufio.NewReader(c)
			path := "/health"
			if i >= idleN {
				path = "/v1/jobs" // no token: 401
			}
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(readers[i], nil)
			if err != nil {
				failures.Add(1)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if i >= idleN {
				// Closed right after the 401, long before the idle timeout.
				c.SetReadDeadline(time.Now().Add(idle / 2))
				if _, err := readers[i].ReadByte(); resp.StatusCode == 401 && err == io.EOF {
					closedAt401.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	opened := time.Now()
	var closedIdle int
	for i := range idleN {
		if conns[i] == nil {
			continue
		}
		conns[i].SetReadDeadline(opened.Add(idle + 20*time.Second))
		if _, err := readers[i].ReadByte(); err == io.EOF {
			closedIdle++
		}
	}
	took := time.Since(opened)
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	got := map[string]int64{"failed": failures.Load(), "closed after 401": closedAt401.Load(), "idle closed": int64(closedIdle)}
	want := map[string]int64{"failed": 0, "closed after 401": n - idleN, "idle closed": idleN}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connections (-want +got):\n%s", diff)
	}
	t.Logf("%d idle connections closed by the server within %v (idle timeout %v)", closedIdle, took.Round(time.Millisecond), idle)
}

// TestServeCapsConnectionsPerIP: over --max-conns-per-ip, a connection is
// closed on accept; one slot frees when a connection closes.
func TestServeCapsConnectionsPerIP(t *testing.T) {
	const max = 8
	addr := freeAddr(t)
	startGuardedServe(t, addr, nil, "--max-conns-per-ip", fmt.Sprint(max))
	// health reports whether a fresh connection gets an answer, and
	// leaves it open.
	health := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, false
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			return nil, false
		}
		resp.Body.Close()
		return c, resp.StatusCode == http.StatusOK
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range max {
		c, ok := health()
		if !ok {
			t.Fatalf("connection %d under the cap got no answer", len(held)+1)
		}
		held = append(held, c)
	}
	if c, ok := health(); ok {
		c.Close()
		t.Fatalf("connection %d over --max-conns-per-ip %d was served", max+1, max)
	}
	held[0].Close()
	held = held[1:]
	var ok bool
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var c net.Conn
		if c, ok = health(); ok {
			held = append(held, c)
		}
	}
	if !ok {
		t.Error("no connection was served after one of the capped ones closed")
	}
}

// TestServeGuardsBrowsersAndScopes: through the binary, a browser-style
// cross-origin or text/plain request, a rebound Host, and a cancel-only
// token reading a finished job's stdout through DELETE are all refused;
// --allowed-host adds a Host and an Origin.
func TestServeGuardsBrowsersAndScopes(t *testing.T) {
	addr := freeAddr(t)
	startGuardedServe(t, addr, map[string]string{"ci": "submit,read", "canceler": "cancel"}, "--allowed-host", "runner.example")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ci := client.New("http://"+addr, "ci")
	ws := t.TempDir()
	acc, err := ci.Submit(ctx, []byte(`{"workspace":{"path":"`+ws+`"},"command":{"argv":["echo","secret-output"]},"policy":{"allowed_commands":["echo"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ci.Wait(ctx, acc.JobID, 50*time.Millisecond); err != nil || res.Stdout.Text != "secret-output\n" {
		t.Fatalf("wait = %q %v", res.Stdout.Text, err)
	}
	type answer struct {
		Status int
		Code   job.Code
		Leak   bool
	}
	task := "version: \"1\"\nkind: Task\n"
	tests := []struct {
		name, method, path, token, ctype, origin, host, body string
		want                                                 answer
	}{
		{"text/plain job", "POST", "/v1/jobs", "ci", "text/plain", "", "", `{}`, answer{Status: 415, Code: "validation.unsupported_media_type"}},
		{"text/plain task", "POST", "/api/v1/tasks", "ci", "text/plain", "", "", task, answer{Status: 415, Code: "validation.unsupported_media_type"}},
		{"form task", "POST", "/api/v1/tasks", "ci", "application/x-www-form-urlencoded", "", "", task, answer{Status: 415, Code: "validation.unsupported_media_type"}},
		{"yaml task reaches the task API", "POST", "/api/v1/tasks", "ci", "application/yaml", "", "", task, answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"json task reaches the task API as JSON", "POST", "/api/v1/tasks", "ci", "application/json", "", "", `{"manifest_yaml":"kind: Task"}`, answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"foreign origin", "POST", "/v1/jobs", "ci", "application/json", "http://evil.example", "", `{}`, answer{Status: 403, Code: job.CodeForbidden}},
		{"foreign origin mcp", "POST", "/mcp", "ci", "application/json", "http://evil.example", "", `{}`, answer{Status: 403, Code: job.CodeForbidden}},
		{"foreign origin ui", "GET", "/ui/", "", "", "http://evil.example", "", "", answer{Status: 403, Code: job.CodeForbidden}},
		{"allowed origin", "GET", "/v1/jobs?limit=1", "ci", "", "https://runner.example", "", "", answer{Status: 200}},
		{"rebound host", "GET", "/v1/jobs?limit=1", "ci", "", "", "evil.example:80", "", answer{Status: 403, Code: job.CodeForbidden}},
		{"allowed host", "GET", "/v1/jobs?limit=1", "ci", "", "", "runner.example", "", answer{Status: 200}},
		{"cancel-only DELETE", "DELETE", "/v1/jobs/" + acc.JobID, "canceler", "", "", "", "", answer{Status: 200}},
		{"read DELETE", "DELETE", "/v1/jobs/" + acc.JobID, "ci", "", "", "", "", answer{Status: 403, Code: job.CodeForbidden}},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(tt.body))
		for k, v := range map[string]string{"Authorization": "Bearer " + tt.token, "Content-Type": tt.ctype, "Origin": tt.origin} {
			if v != "" && v != "Bearer " {
				req.Header.Set(k, v)
			}
		}
		if tt.host != "" {
			req.Host = tt.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error job.Error }
		jsonErr := json.Unmarshal(b, &e)
		got := answer{Status: resp.StatusCode, Code: e.Error.Code, Leak: strings.Contains(string(b), "secret-output")}
		if jsonErr != nil && resp.StatusCode >= 400 {
			t.Errorf("%s: error body is not JSON: %s", tt.name, b)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: %s %s (-want +got):\n%s%s", tt.name, tt.method, tt.path, diff, b)
		}
	}
}

// TestServeMCPClientPassesTheGuard: a real MCP client (streamable HTTP:
// JSON POSTs, an SSE GET, a DELETE at close) works through serve's
// checks, at 127.0.0.1 and at an --allowed-host name that the SDK's own
// loopback-only Host check would refuse.
func TestServeMCPClientPassesTheGuard(t *testing.T) {
	addr := freeAddr(t)
	startGuardedServe(t, addr, nil, "--allowed-host", "runner.example")
	for _, host := range []string{"", "runner.example"} {
		hc := &http.Client{Transport: hostTransport(host)}
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			cancel()
			t.Fatalf("Host %q: connect: %v", host, err)
		}
		tools, err := cs.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) == 0 {
			t.Errorf("Host %q: tools/list = %v %v, want tools", host, tools, err)
		}
		if err := cs.Close(); err != nil {
			t.Errorf("Host %q: close: %v", host, err)
		}
		cancel()
	}
}

// hostTransport sends every request with Host set to host ("" leaves it).
type hostTransport string

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if h != "" {
		r = r.Clone(r.Context())
		r.Host = string(h)
	}
	return http.DefaultTransport.RoundTrip(r)
}
