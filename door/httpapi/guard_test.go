package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// answer is what a guard test compares: the status, the error code, and
// whether the server closes the connection after it.
type answer struct {
	Status int
	Code   job.Code
	Close  bool
}

// TestGuard: every request, on every route (mounted ones included), must
// name a served Host, carry no foreign Origin, and send a JSON or YAML
// body on a state-changing method. A request that passes reaches the
// route: POST /v1/jobs with "{}" answers 422 there.
func TestGuard(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true, allowedHosts: []string{"runner.example", "pinned.example:8443"}})
	e.api.Mux().Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	u, _ := url.Parse(e.url)
	self := u.Host // 127.0.0.1:port
	port := u.Port()
	const (
		jsonCT = "application/json"
		body   = "{}"
	)
	passed := answer{Status: 422, Code: job.CodeInvalidRequest}
	forbidden := answer{Status: 403, Code: job.CodeForbidden, Close: true}
	unsupported := answer{Status: 415, Code: job.CodeUnsupportedMediaType}
	tests := []struct {
		name, method, path, ctype, body, origin, host string
		want                                          answer
	}{
		// Content-Type of state-changing requests.
		{"json", "POST", "/v1/jobs", jsonCT, body, "", "", passed},
		{"json charset", "POST", "/v1/jobs", "application/json; charset=utf-8", body, "", "", passed},
		{"json suffix", "POST", "/v1/jobs", "application/vnd.agent-runner+json", body, "", "", passed},
		{"yaml", "POST", "/v1/jobs", "application/yaml", body, "", "", passed},
		{"x-yaml", "POST", "/v1/jobs", "application/x-yaml", body, "", "", passed},
		{"text yaml", "POST", "/v1/jobs", "text/yaml", body, "", "", passed},
		{"text/plain", "POST", "/v1/jobs", "text/plain", body, "", "", unsupported},
		{"text/plain charset", "POST", "/v1/jobs", "text/plain;charset=UTF-8", body, "", "", unsupported},
		{"form", "POST", "/v1/jobs", "application/x-www-form-urlencoded", body, "", "", unsupported},
		{"multipart", "POST", "/v1/jobs", "multipart/form-data; boundary=x", body, "", "", unsupported},
		{"no type on a body", "POST", "/v1/jobs", "", body, "", "", unsupported},
		{"garbage type", "POST", "/v1/jobs", "json", body, "", "", unsupported},
		{"task yaml", "POST", "/api/v1/tasks", "text/plain", "kind: Task", "", "", unsupported},
		{"text/plain without body", "POST", "/v1/jobs", "text/plain", "", "", "", unsupported},
		{"delete without body", "DELETE", "/v1/jobs/job_nope", "", "", "", "", answer{Status: 404, Code: job.CodeJobNotFound}},
		{"delete text/plain", "DELETE", "/v1/jobs/job_nope", "text/plain", "x", "", "", unsupported},
		{"put text/plain", "PUT", "/v1/jobs", "text/plain", "x", "", "", unsupported},
		{"patch form", "PATCH", "/v1/jobs", "application/x-www-form-urlencoded", "a=b", "", "", unsupported},
		{"mounted route text/plain", "POST", "/mcp", "text/plain", body, "", "", unsupported},
		{"mounted route json", "POST", "/mcp", jsonCT, body, "", "", answer{Status: 204}},
		{"get ignores type", "GET", "/health", "text/plain", "", "", "", answer{Status: 200}},

		// Origin, on every route and method.
		{"own origin", "POST", "/v1/jobs", jsonCT, body, "http://" + self, "", passed},
		{"own origin localhost", "POST", "/v1/jobs", jsonCT, body, "http://localhost:" + port, "localhost:" + port, passed},
		{"allowed origin", "POST", "/v1/jobs", jsonCT, body, "https://runner.example", "", passed},
		{"allowed origin any port", "POST", "/v1/jobs", jsonCT, body, "http://runner.example:8080", "", passed},
		{"allowed origin pinned port", "POST", "/v1/jobs", jsonCT, body, "https://pinned.example:8443", "", passed},
		{"allowed origin other port", "POST", "/v1/jobs", jsonCT, body, "https://pinned.example", "", forbidden},
		{"foreign origin", "POST", "/v1/jobs", jsonCT, body, "http://evil.example", "", forbidden},
		{"foreign origin text/plain", "POST", "/v1/jobs", "text/plain", body, "http://evil.example", "", forbidden},
		{"foreign origin get", "GET", "/v1/jobs", "", "", "http://evil.example", "", forbidden},
		{"foreign origin health", "GET", "/health", "", "", "http://evil.example", "", forbidden},
		{"foreign origin delete", "DELETE", "/v1/jobs/job_nope", "", "", "http://evil.example", "", forbidden},
		{"foreign origin mcp", "POST", "/mcp", jsonCT, body, "http://evil.example", "", forbidden},
		{"other local port", "POST", "/v1/jobs", jsonCT, body, "http://127.0.0.1:1", "", forbidden},
		{"other loopback name", "POST", "/v1/jobs", jsonCT, body, "http://localhost:" + port, "", forbidden},
		{"https to http", "POST", "/v1/jobs", jsonCT, body, "https://" + self, "", forbidden},
		{"null origin", "POST", "/v1/jobs", jsonCT, body, "null", "", forbidden},
		{"empty origin", "POST", "/v1/jobs", jsonCT, body, " ", "", forbidden},
		{"origin with path", "POST", "/v1/jobs", jsonCT, body, "http://" + self + "/x", "", forbidden},

		// Host.
		{"localhost", "GET", "/health", "", "", "", "localhost:" + port, answer{Status: 200}},
		{"localhost any port", "GET", "/health", "", "", "", "LOCALHOST.:1", answer{Status: 200}},
		{"ipv6 loopback", "GET", "/health", "", "", "", "[::1]:" + port, answer{Status: 200}},
		{"allowed host", "GET", "/v1/jobs", "", "", "", "runner.example", answer{Status: 200}},
		{"allowed host pinned port", "GET", "/v1/jobs", "", "", "", "pinned.example:8443", answer{Status: 200}},
		{"allowed host other port", "GET", "/v1/jobs", "", "", "", "pinned.example:443", forbidden},
		{"rebound name", "GET", "/v1/jobs", "", "", "", "evil.example:" + port, forbidden},
		{"rebound name health", "GET", "/health", "", "", "", "evil.example", forbidden},
		{"other address", "GET", "/v1/jobs", "", "", "", "10.0.0.1:" + port, forbidden},
		{"loopback subnet", "GET", "/v1/jobs", "", "", "", "127.0.0.2:" + port, forbidden},
		{"rebound name mcp", "POST", "/mcp", jsonCT, body, "", "evil.example", forbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, e.url+tt.path, strings.NewReader(tt.body))
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", strings.TrimSpace(tt.origin))
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			if got, want := do(t, req), tt.want; !cmp.Equal(got, want) {
				t.Errorf("%s %s (type %q, origin %q, host %q): got, want %+v", tt.method, tt.path, tt.ctype, tt.origin, tt.host, cmp.Diff(want, got))
			}
		})
	}
}

// do sends req and returns its answer.
func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Code: errCode(b), Close: resp.Close}
}

// TestGuardRefusesCrossOriginWebSocket: a WebSocket upgrade from another
// origin is refused before the route, like any other request.
func TestGuardRefusesCrossOriginWebSocket(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	for _, path := range []string{"/v1/jobs/job_nope/ws", "/ws/tasks/x/stream"} {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Origin", "http://evil.example")
		if got, want := do(t, req), (answer{Status: 403, Code: job.CodeForbidden, Close: true}); got != want {
			t.Errorf("upgrade %s: got %+v, want %+v", path, got, want)
		}
	}
}

// TestUnauthorizedClosesTheConnection: after a 401 the server closes the
// connection instead of keeping it alive.
func TestUnauthorizedClosesTheConnection(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(auth.Hash("reader-token")+" read\n"), 0o600)
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, opts{noWorkers: true, tokens: tokens})
	u, _ := url.Parse(e.url)
	tests := []struct {
		name, request string
		want          int
		closed        bool
	}{
		{"no token", "GET /v1/jobs HTTP/1.1\r\nHost: " + u.Host + "\r\n\r\n", 401, true},
		{"unknown token", "GET /v1/jobs HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer nope\r\n\r\n", 401, true},
		{"known token", "GET /v1/jobs HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer reader-token\r\n\r\n", 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.request)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			c.SetReadDeadline(time.Now().Add(time.Second))
			_, err = br.ReadByte()
			closed := err == io.EOF
			if got, want := [2]any{resp.StatusCode, closed}, [2]any{tt.want, tt.closed}; got != want {
				t.Errorf("status, closed: got %v, want %v (read error %v)", got, want, err)
			}
		})
	}
}

// TestCancelOnlyTokenGetsNoOutput: DELETE of a finished job answers a
// token that may cancel but not read with the job's status only, never
// its stdout or artifacts; a token that may read gets the result.
func TestCancelOnlyTokenGetsNoOutput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(auth.Hash("canceler")+" cancel\n"+auth.Hash("reader")+" cancel,read\n"+auth.Hash("root")+" admin\n"), 0o600)
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, opts{tokens: tokens})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := client.New(e.url, "root")
	body, _ := json.Marshal(e.request([]string{"echo", "secret-output"}, "echo"))
	acc, err := root.Submit(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Wait(ctx, acc.JobID, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token      string
		wantStatus int
		wantOutput bool
	}{
		{"canceler", 200, false},
		{"reader", 200, true},
		{"root", 200, true},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodDelete, e.url+"/v1/jobs/"+acc.JobID, nil)
		req.Header.Set("Authorization", "Bearer "+tt.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var fields map[string]any
		json.Unmarshal(b, &fields)
		_, hasStdout := fields["stdout"]
		_, hasArtifacts := fields["artifacts"]
		leaked := strings.Contains(string(b), "secret-output") || hasStdout || hasArtifacts
		if got, want := [3]any{resp.StatusCode, leaked, fields["status"]}, [3]any{tt.wantStatus, tt.wantOutput, string(job.StatusCompleted)}; got != want {
			t.Errorf("DELETE with %q: got (status, output, job status) %v, want %v: %s", tt.token, got, want, b)
		}
	}
}
