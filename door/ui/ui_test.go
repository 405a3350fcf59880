package ui

import (
	"net/http/httptest"
	"path"
	"strings"
	"testing"

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
		{"/ui/vendor/xterm/xterm.mjs", 200, "text/javascript; charset=utf-8", "export{"},
		{"/ui/vendor/xterm/xterm.css", 200, "text/css; charset=utf-8", ".xterm"},
		{"/ui/vendor/xterm/LICENSE", 200, "text/plain; charset=utf-8", "Permission is hereby granted"},
		{"/ui/nope.js", 404, "", ""},
		{"/ui/vendor", 404, "", ""},
		{"/ui/vendor/", 404, "", ""},
		{"/ui/vendor/xterm/../../app.js", 404, "", ""},
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
		if path.Base(name) == "LICENSE" {
			continue // text for readers, which no page loads
		}
		b, err := static.ReadFile("static/" + name)
		if err != nil {
			t.Fatalf("asset %s: %v", p, err)
		}
		// The SVG namespace is a name, not a location.
		text := strings.ReplaceAll(string(b), `'http://www.w3.org/2000/svg'`, "")
		if strings.HasPrefix(name, "vendor/") {
			text = vendoredCode(text)
		}
		for _, bad := range []string{"http://", "https://", "//cdn", "localStorage.", "sessionStorage."} {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q", p, bad)
			}
		}
	}
}

// vendoredCode is a vendored file without what names another origin
// and loads nothing: its comment lines (" * http://...", the credits in
// its license header) and the XML namespaces its DOM code creates
// elements in.
func vendoredCode(text string) string {
	var keep []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "*") {
			keep = append(keep, line)
		}
	}
	text = strings.Join(keep, "\n")
	for _, ns := range []string{`"http://www.w3.org/1999/xhtml"`, `"http://www.w3.org/2000/svg"`} {
		text = strings.ReplaceAll(text, ns, "")
	}
	return text
}

func TestAssets(t *testing.T) {
	got := Assets()
	want := []string{"/ui/", "/ui/agentruns.js", "/ui/api.js", "/ui/app.js", "/ui/cspstyles.js", "/ui/diff.js", "/ui/dom.js", "/ui/jobs.js", "/ui/overview.js", "/ui/session.js", "/ui/sessionfiles.js", "/ui/sessions.js", "/ui/sessionterm.js", "/ui/style.css", "/ui/tasks.js", "/ui/term.js",
		"/ui/vendor/addon-fit/LICENSE", "/ui/vendor/addon-fit/addon-fit.mjs", "/ui/vendor/xterm/LICENSE", "/ui/vendor/xterm/xterm.css", "/ui/vendor/xterm/xterm.mjs"}
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
