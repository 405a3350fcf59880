package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

func TestFilesServeOnlyEmbeddedAssets(t *testing.T) {
	h := files()
	tests := []struct {
		path       string
		wantStatus int
		wantType   string
		wantBody   string
	}{
		{"/ui/", 200, "text/html; charset=utf-8", `<script type="module" src="/ui/app.js">`},
		{"/ui/app.js", 200, "text/javascript; charset=utf-8", "import"},
		{"/ui/style.css", 200, "text/css; charset=utf-8", ":root"},
		{"/ui/index.html", 200, "text/html; charset=utf-8", "<!doctype html>"},
		{"/ui/nope.js", 404, "", ""},
		{"/ui/static/app.js", 404, "", ""},
		{"/ui/../ui.go", 404, "", ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://x"+tt.path, nil))
		if rec.Code != tt.wantStatus {
			t.Errorf("GET %s = %d, want %d", tt.path, rec.Code, tt.wantStatus)
			continue
		}
		if tt.wantStatus != 200 {
			continue
		}
		if got := rec.Header().Get("Content-Type"); got != tt.wantType {
			t.Errorf("GET %s Content-Type = %q, want %q", tt.path, got, tt.wantType)
		}
		if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'self'") {
			t.Errorf("GET %s CSP = %q, want default-src 'self'", tt.path, got)
		}
		if !strings.Contains(rec.Body.String(), tt.wantBody) {
			t.Errorf("GET %s body lacks %q", tt.path, tt.wantBody)
		}
	}
}

// TestAssetsLoadNothingFromElsewhere: the dashboard works with no
// internet, so no page or script names another origin.
func TestAssetsLoadNothingFromElsewhere(t *testing.T) {
	for _, p := range Assets() {
		name := strings.TrimPrefix(p, Prefix)
		if name == "" {
			name = "index.html"
		}
		b, err := static.ReadFile("static/" + name)
		if err != nil {
			t.Fatalf("asset %s: %v", p, err)
		}
		// The SVG namespace is a name, not a location.
		text := strings.ReplaceAll(string(b), `'http://www.w3.org/2000/svg'`, "")
		for _, bad := range []string{"http://", "https://", "//cdn", "localStorage.", "sessionStorage."} {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q", p, bad)
			}
		}
	}
}

func TestAssets(t *testing.T) {
	got := Assets()
	want := []string{"/ui/", "/ui/agentruns.js", "/ui/api.js", "/ui/app.js", "/ui/diff.js", "/ui/dom.js", "/ui/jobs.js", "/ui/overview.js", "/ui/style.css", "/ui/tasks.js", "/ui/term.js"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Assets() (-want +got); httpapi's publicPaths must list the same paths:\n%s", diff)
	}
}

func TestRedactWithholdsEnvValues(t *testing.T) {
	req := job.Request{Command: job.Command{Argv: []string{"env"}, Env: map[string]string{"API_KEY": "s3cret", "MODE": "x"}}}
	got := redact(req)
	if diff := cmp.Diff(map[string]string{"API_KEY": withheld, "MODE": withheld}, got.Command.Env); diff != "" {
		t.Errorf("redact env (-want +got):\n%s", diff)
	}
	if req.Command.Env["API_KEY"] != "s3cret" {
		t.Errorf("redact changed the caller's request")
	}
}

// fakeStream stands in for the task API's WebSocket route: it checks the
// bearer token, sends two messages and closes normally.
func fakeStream(t *testing.T) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws/tasks/{id}/stream", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":"auth.forbidden","message":"no"}}`)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		for _, m := range []string{`{"type":"output","task_id":"` + r.PathValue("id") + `","text":"\u001b[32mhi\u001b[0m"}`, `{"type":"state_change","to":"completed"}`} {
			if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
				return
			}
		}
		c.Close(websocket.StatusNormalClosure, "task completed")
	})
	return mux
}

func TestRelayStreamsTheWebSocketAsNDJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := fakeStream(t)
	mux.Handle("GET /ui-api/tasks/{id}/stream", newRelay(ctx, mux))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(token string) (*http.Response, []string) {
		req, _ := http.NewRequest("GET", srv.URL+"/ui-api/tasks/t1/stream", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		resp, err := http.DefaultClient.Do(req.WithContext(rctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var lines []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		return resp, lines
	}
	resp, lines := get("good")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("relay = %d %s, want 200 application/x-ndjson", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var types []string
	for _, l := range lines {
		var m struct{ Type, Text string }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		types = append(types, m.Type)
	}
	if diff := cmp.Diff([]string{"output", "state_change"}, types); diff != "" {
		t.Errorf("relayed message types (-want +got):\n%s", diff)
	}
	// The route's own refusal reaches the page as it is.
	resp, lines = get("bad")
	if resp.StatusCode != http.StatusForbidden || len(lines) != 1 || !strings.Contains(lines[0], "auth.forbidden") {
		t.Errorf("relay with a refused token = %d %q, want 403 auth.forbidden", resp.StatusCode, lines)
	}
}
