package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentruns "github.com/agent-runner/agent-runner/agent/runs"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/door/agentapi"
	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/door/imageapi"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/door/ui"
	"github.com/agent-runner/agent-runner/image"
	"github.com/agent-runner/agent-runner/session"
	runstore "github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/taskstore"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// mcpMethods are the methods of MCP's streamable HTTP transport, which
// serve mounts at /mcp for every method (cmd/agent-runner/serve_mcp.go).
var mcpMethods = []string{"POST", "GET", "DELETE"}

// uiRoutes are the dashboard's routes as ui.Mount registers them (package
// ui lists them nowhere else); TestOpenAPIRoutesAnswer mounts the
// dashboard, so a route here that ui.Mount does not register fails there.
var uiRoutes = []string{"GET /{$}", "GET /ui/", "GET /ui-api/jobs/{job_id}/request"}

// servedRoutes is every "METHOD /path" `agent-runner serve` answers on its
// listener: the job routes, the task API, capability runs, /mcp and the
// dashboard; path wildcards {name...} are written {name} as OpenAPI does,
// and /{$} as /.
func servedRoutes() []string {
	var out []string
	for _, r := range httpapi.Routes() {
		out = append(out, r.Method+" "+r.Path)
	}
	out = append(out, taskapi.Patterns()...)
	out = append(out, agentapi.Patterns()...)
	out = append(out, sessionapi.Patterns()...)
	out = append(out, imageapi.Patterns()...)
	for _, m := range mcpMethods {
		out = append(out, m+" /mcp")
	}
	out = append(out, uiRoutes...)
	return normalize(out)
}

var wildcard = regexp.MustCompile(`\{(\w+)\.\.\.\}`)

func normalize(routes []string) []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = strings.ReplaceAll(wildcard.ReplaceAllString(r, "{$1}"), "{$}", "")
	}
	sort.Strings(out)
	return out
}

// publicPaths need no token and so name no x-scope.
var publicPaths = []string{"/health", "/openapi.json", "/", "/ui/"}

type openAPIOperation struct {
	Tags  []string `json:"tags"`
	Scope string   `json:"x-scope"`
}

// documented reads the document's operations, those tagged children (the
// children socket's) apart from the rest; it fails on an operation
// without a tag or, off the socket, without x-scope, and on a socket path
// without its own server.
func documented(t *testing.T) (served, children []string) {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(httpapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		_, hasServers := ops["servers"]
		for method, raw := range ops {
			if method == "parameters" || method == "servers" {
				continue
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			route := strings.ToUpper(method) + " " + path
			switch {
			case len(op.Tags) == 0:
				t.Errorf("%s has no tag", route)
			case slices.Contains(op.Tags, "children"):
				if !hasServers {
					t.Errorf("%s is the children socket's but its path names no server", route)
				}
				children = append(children, route)
				continue
			case op.Scope == "" && !slices.Contains(publicPaths, path):
				t.Errorf("%s has no x-scope", route)
			}
			served = append(served, route)
		}
	}
	sort.Strings(served)
	sort.Strings(children)
	return served, children
}

// TestOpenAPIMatchesRoutes: every route serve answers is documented and
// every documented operation is served, and the same for the children
// socket (documented as its own server, tag children).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	served, children := documented(t)
	if diff := cmp.Diff(servedRoutes(), served); diff != "" {
		t.Errorf("serve's routes (-) against /openapi.json (+):\n%s", diff)
	}
	if diff := cmp.Diff(normalize(taskapi.ChildPatterns()), children); diff != "" {
		t.Errorf("children socket routes (-) against /openapi.json tag children (+):\n%s", diff)
	}
}

// TestOpenAPIRoutesAnswer sends every documented operation of the job,
// task and capability-run APIs and the dashboard to a server mounted as
// serve mounts them: none may be the router's own 404 or 405 (text/plain),
// so a documented path that is spelt differently from the registered one
// fails. /mcp is left out: its
// handler is wired in cmd/agent-runner and answers every method.
func TestOpenAPIRoutesAnswer(t *testing.T) {
	e := newEnv(t, opts{})
	store, err := taskstore.New(filepath.Join(t.TempDir(), "tasks"), lifecycle.Config{Backend: localprocess.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	taskapi.Routes(e.api.Mux(), store, e.api.Auth)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ui.Mount(ui.Config{Mux: e.api.Mux(), Auth: e.api.Auth, Store: e.r.Store()})
	roots, err := workspaceroot.New([]string{t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := agentruns.New(ctx, agentruns.Config{Dir: filepath.Join(t.TempDir(), "agent-runs"), Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	agentapi.Routes(e.api.Mux(), runs, e.api.Auth)
	recs, err := runstore.OpenRecords(filepath.Join(t.TempDir(), runstore.Sessions.Dir), runstore.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := session.New(session.Config{Runner: e.r, Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	sessionapi.Routes(e.api.Mux(), sessions, e.api.Auth)
	images, err := image.Open(image.Config{Dir: filepath.Join(t.TempDir(), "images")})
	if err != nil {
		t.Fatal(err)
	}
	(&imageapi.Door{Store: images}).Routes(e.api.Mux(), e.api.Auth)
	id := e.submit(e.request([]string{"true"}, "true"))
	e.wait(id)
	served, _ := documented(t)
	for _, op := range served {
		method, path, _ := strings.Cut(op, " ")
		if path == "/mcp" {
			continue
		}
		path = strings.NewReplacer("{job_id}", id, "{id}", "no-such-task", "{path}", "no/such/file", "{name}", "none", "{ref}", "no-such-task").Replace(path)
		req, _ := http.NewRequest(method, e.url+path, strings.NewReader(""))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body []byte
		// An event stream may never end (/v1/events): its headers say
		// enough.
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			body, _ = io.ReadAll(resp.Body)
		}
		resp.Body.Close()
		routerMiss := resp.StatusCode == http.StatusMethodNotAllowed ||
			(resp.StatusCode == http.StatusNotFound && !strings.Contains(resp.Header.Get("Content-Type"), "json"))
		if routerMiss {
			t.Errorf("%s %s = %d %q: the router has no such route", method, path, resp.StatusCode, body)
		}
		// A GET of the finished job's routes, the lists, the service's
		// and the dashboard's answers 200 (/ redirects to /ui/).
		if method == "GET" && !strings.Contains(path, "no-such-task") && !strings.Contains(path, "no/such/file") &&
			!strings.HasSuffix(path, "/ws") && resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, resp.StatusCode)
		}
	}
}
