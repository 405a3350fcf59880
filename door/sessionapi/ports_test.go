package sessionapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// portsEnv is a sessions door on one backend whose sandboxes may take
// a workspace holding this test binary (the server: portServer).
type portsEnv struct {
	srv  *httptest.Server
	s    *session.Service
	proj string
	kind string
}

// newPortsEnv serves the sessions routes over kind; linux_sandbox is
// skipped where this host cannot run it.
func newPortsEnv(t *testing.T, kind string) *portsEnv {
	t.Helper()
	var b backend.Backend = localprocess.Backend{}
	if kind == linuxsandbox.Kind {
		lb, err := linuxsandbox.New(backend.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := lb.Available(context.Background()); err != nil {
			t.Skipf("linux_sandbox is not available here: %v", err)
		}
		b = lb
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	proj := filepath.Join(dir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "server"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := workspaceroot.New([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	set := backend.Set{kind: b}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: kind, Backends: set})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.OpenRecords(filepath.Join(dir, "store", store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.New(session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: kind, UnsafeLocalProcess: true, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	sessionapi.Routes(mux, s, func(_ string, h http.Handler) http.Handler { return h })
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return &portsEnv{srv: srv, s: s, proj: proj, kind: kind}
}

// sandboxWithServer creates sandbox id with the server running in it
// and returns the port it listens on.
func (e *portsEnv) sandboxWithServer(t *testing.T, id string) int {
	t.Helper()
	if _, _, err := e.s.Create(context.Background(), session.CreateRequest{ID: id, Workspace: &session.Workspace{Path: e.proj}}); err != nil {
		t.Fatalf("Create(%s) = %v", id, err)
	}
	info, err := e.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"./server"}, Env: map[string]string{portServerEnv: "1"}})
	if err != nil {
		t.Fatalf("StartProcess(server) = %v", err)
	}
	var out strings.Builder
	errLine := io.EOF
	err = e.s.FollowProcess(context.Background(), id, info.PID, 0, func(ev session.ProcessEvent) error {
		if o, ok := ev.Data.(session.OutputEvent); ok {
			out.WriteString(o.Data)
			if strings.Contains(out.String(), "\n") {
				return errLine
			}
		}
		return nil
	})
	port, perr := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != errLine || perr != nil {
		t.Fatalf("the server printed %q and ended (%v), want its port", out.String(), err)
	}
	return port
}

// TestPortsProxy: a request through /v1/sandboxes/{id}/ports/{port}/...
// reaches the server in the sandbox with its method, the rest of its
// path (escapes kept), its query and its body of any type, without the
// caller's Authorization and with X-Forwarded-*; the answer comes back
// with Content-Security-Policy: sandbox; a WebSocket is passed through.
func TestPortsProxy(t *testing.T) {
	for _, kind := range []string{localprocess.Kind, linuxsandbox.Kind} {
		t.Run(kind, func(t *testing.T) {
			e := newPortsEnv(t, kind)
			port := e.sandboxWithServer(t, "a")
			base := e.srv.URL + "/v1/sandboxes/a/ports/" + strconv.Itoa(port)

			req, _ := http.NewRequest("POST", base+"/echo/x%2Fy/z?q=1&r=two", strings.NewReader("form=body"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer caller-secret")
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
			req.Header.Set("X-Custom", "kept")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var got seen
			json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("POST through the port = %d", resp.StatusCode)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") {
				t.Errorf("Content-Security-Policy = %q, want a sandbox policy", csp)
			}
			want := seen{Method: "POST", Path: "/echo/x/y/z", RawPath: "/echo/x%2Fy/z", Query: "q=1&r=two", Host: "127.0.0.1:" + strconv.Itoa(port), Body: "form=body"}
			hdr := got.Header
			got.Header = nil
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("what the server got (-want +got):\n%s", diff)
			}
			if v, ok := hdr["Authorization"]; ok {
				t.Errorf("the server got Authorization %q, want none", v)
			}
			for k, want := range map[string]string{
				"X-Custom": "kept", "X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http",
				"X-Forwarded-Host": strings.TrimPrefix(e.srv.URL, "http://"), "X-Forwarded-Prefix": "/v1/sandboxes/a/ports/" + strconv.Itoa(port),
			} {
				if got := strings.Join(hdr[k], ","); got != want {
					t.Errorf("the server got %s %q, want %q", k, got, want)
				}
			}

			// A body far over the JSON routes' cap is streamed through.
			big := int64(3 * sessionapi.MaxBodyBytes)
			resp, err = http.Post(base+"/count", "application/octet-stream", io.LimitReader(zeros{}, big))
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(n) != strconv.FormatInt(big, 10) {
				t.Errorf("the server counted %q bytes of a %d-byte body", n, big)
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
			if err != nil {
				t.Fatalf("WebSocket through the port: %v", err)
			}
			defer c.CloseNow()
			for _, msg := range []string{"first", "second"} {
				if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
					t.Fatal(err)
				}
				_, b, err := c.Read(ctx)
				if err != nil || string(b) != msg {
					t.Errorf("WebSocket echo = %q, %v; want %q", b, err, msg)
				}
			}
			c.Close(websocket.StatusNormalClosure, "")
		})
	}
}

// TestPortsErrors: a bad port is 422, an unknown sandbox 404, a paused
// one 409, a port nothing listens on 502 session.port_unreachable; on
// an isolating backend sandbox b's route cannot reach sandbox a's
// server.
func TestPortsErrors(t *testing.T) {
	for _, kind := range []string{localprocess.Kind, linuxsandbox.Kind} {
		t.Run(kind, func(t *testing.T) {
			e := newPortsEnv(t, kind)
			port := strconv.Itoa(e.sandboxWithServer(t, "a"))
			if _, _, err := e.s.Create(context.Background(), session.CreateRequest{ID: "b"}); err != nil {
				t.Fatal(err)
			}
			srv := e.srv
			tests := []struct {
				name, method, path string
				want               answer
			}{
				{"port 0", "GET", "/v1/sandboxes/a/ports/0/", answer{Status: 422, Code: job.CodeInvalidRequest}},
				{"port 65536", "GET", "/v1/sandboxes/a/ports/65536/", answer{Status: 422, Code: job.CodeInvalidRequest}},
				{"port name", "GET", "/v1/sandboxes/a/ports/http/", answer{Status: 422, Code: job.CodeInvalidRequest}},
				{"port with a sign", "GET", "/v1/sandboxes/a/ports/+80/", answer{Status: 422, Code: job.CodeInvalidRequest}},
				{"unknown sandbox", "GET", "/v1/sandboxes/nope/ports/" + port + "/", answer{Status: 404, Code: job.CodeJobNotFound}},
				{"closed port", "DELETE", "/v1/sandboxes/a/ports/1/x", answer{Status: 502, Code: job.CodeSessionPortUnreachable}},
				{"served", "GET", "/v1/sandboxes/a/ports/" + port + "/echo/", answer{Status: 200}},
				{"pause", "POST", "/v1/sandboxes/a/pause", answer{Status: 200}},
				{"paused", "GET", "/v1/sandboxes/a/ports/" + port + "/echo/", answer{Status: 409, Code: job.CodeSessionNotRunning}},
			}
			if kind == linuxsandbox.Kind {
				tests = append(tests, struct {
					name, method, path string
					want               answer
				}{"another sandbox's port", "GET", "/v1/sandboxes/b/ports/" + port + "/echo/", answer{Status: 502, Code: job.CodeSessionPortUnreachable}})
			}
			for _, tt := range tests {
				if got := call(t, srv, tt.method, tt.path, ""); !cmp.Equal(got, tt.want) {
					t.Errorf("%s: %s %s: (-want +got)\n%s", tt.name, tt.method, tt.path, cmp.Diff(tt.want, got))
				}
			}
		})
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
