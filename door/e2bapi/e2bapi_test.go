package e2bapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/door/e2bapi"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
)

// Tokens of the test's token file: one with the sessions scope, one
// without.
const (
	sessionsKey = "art_sessions"
	readKey     = "art_read"
)

// newServer serves the door at /e2b over a local_process session
// service, its control plane behind the test's token file.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _ := newServerWith(t, nil)
	return srv
}

// newServerWith is newServer with the session service's config edited
// by edit (nil: as it is), and the service.
func newServerWith(t *testing.T, edit func(*session.Config)) (*httptest.Server, *session.Service) {
	t.Helper()
	dir := t.TempDir()
	set := backend.Set{"local_process": localprocess.Backend{}}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", Backends: set})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.OpenRecords(filepath.Join(dir, "store", store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: "local_process", UnsafeLocalProcess: true}
	if edit != nil {
		edit(&cfg)
	}
	s, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	file := filepath.Join(dir, "tokens")
	lines := auth.Hash(sessionsKey) + " sessions tester\n" + auth.Hash(readKey) + " read reader\n"
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	door := e2bapi.New(e2bapi.Config{Sessions: s, Tokens: tokens})
	mux := http.NewServeMux()
	mux.Handle(door.Prefix()+"/", door)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, s
}

// call sends one request and returns its status and body.
func call(t *testing.T, method, url string, header map[string]string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apiHeader is the control plane's headers with key.
func apiHeader(key string) map[string]string {
	return map[string]string{"X-API-Key": key, "Content-Type": "application/json"}
}

// created is a create's answer.
type created struct {
	SandboxID, EnvdVersion, EnvdAccessToken string
}

// create creates a sandbox with body.
func create(t *testing.T, srv *httptest.Server, body string) created {
	t.Helper()
	status, got := call(t, "POST", srv.URL+"/e2b/v2/sandboxes", apiHeader(sessionsKey), strings.NewReader(body))
	if status != http.StatusCreated {
		t.Fatalf("POST /v2/sandboxes %s = %d %s, want 201", body, status, got)
	}
	var c created
	if err := json.Unmarshal([]byte(got), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestControlPlane(t *testing.T) {
	srv := newServer(t)
	sb := create(t, srv, `{"templateID":"base","timeout":60,"metadata":{"owner":"me"}}`)
	if sb.EnvdVersion != e2bapi.EnvdVersion || sb.EnvdAccessToken == "" {
		t.Errorf("create = %+v, want envd %s and an access token", sb, e2bapi.EnvdVersion)
	}
	base := srv.URL + "/e2b/sandboxes/" + sb.SandboxID
	for _, tc := range []struct {
		method, url, key, body string
		status                 int
		// contains is a part of the answer.
		contains string
	}{
		{"GET", srv.URL + "/e2b/v2/sandboxes", "", "", 401, `"code":401`},
		{"GET", srv.URL + "/e2b/v2/sandboxes", "art_unknown", "", 401, "unknown token"},
		{"GET", srv.URL + "/e2b/v2/sandboxes", readKey, "", 403, "sessions"},
		{"GET", srv.URL + "/e2b/v2/sandboxes?metadata=owner%3Dme", sessionsKey, "", 200, sb.SandboxID},
		{"GET", srv.URL + "/e2b/sandboxes?metadata=owner%3Dyou", sessionsKey, "", 200, "[]"},
		{"GET", srv.URL + "/e2b/v2/sandboxes?state=paused", sessionsKey, "", 200, "[]"},
		{"GET", base, sessionsKey, "", 200, `"state":"running"`},
		{"POST", srv.URL + "/e2b/v2/sandboxes", sessionsKey, `{"templateID":"base","bogus":1}`, 400, "bogus"},
		{"POST", srv.URL + "/e2b/v2/sandboxes", sessionsKey, `{"autoPause":true,"autoPauseMemory":false}`, 501, "autoPauseMemory"},
		{"POST", srv.URL + "/e2b/v2/sandboxes", sessionsKey, `{"autoResume":{"enabled":true}}`, 400, "auto_resume"},
		{"POST", srv.URL + "/e2b/v2/sandboxes", sessionsKey, `{"templateID":"python"}`, 404, "python"},
		{"POST", srv.URL + "/e2b/v2/sandboxes", sessionsKey, `{"allow_internet_access":true}`, 403, "no internet"},
		{"POST", base + "/timeout", sessionsKey, `{"timeout":120}`, 204, ""},
		{"POST", base + "/refreshes", sessionsKey, `{"duration":30}`, 204, ""},
		{"POST", base + "/pause", sessionsKey, "", 204, ""},
		{"POST", base + "/pause", sessionsKey, "", 409, "already paused"},
		{"GET", base, sessionsKey, "", 200, `"state":"paused"`},
		{"POST", srv.URL + "/e2b/v2/sandboxes/" + sb.SandboxID + "/connect", sessionsKey, `{"timeout":90}`, 201, sb.EnvdAccessToken},
		{"POST", srv.URL + "/e2b/v2/sandboxes/" + sb.SandboxID + "/connect", sessionsKey, `{}`, 200, sb.SandboxID},
		{"GET", base + "/metrics", sessionsKey, "", 501, "not supported"},
		{"GET", srv.URL + "/e2b/templates", sessionsKey, "", 501, "not supported"},
		{"DELETE", base, sessionsKey, "", 204, ""},
		{"DELETE", base, sessionsKey, "", 404, `"code":404`},
		{"GET", base, sessionsKey, "", 404, "stopped"},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		h := apiHeader(tc.key)
		if tc.key == "" {
			delete(h, "X-API-Key")
		}
		status, got := call(t, tc.method, tc.url, h, body)
		if status != tc.status || !strings.Contains(got, tc.contains) {
			t.Errorf("%s %s %s = %d %s, want %d with %q", tc.method, strings.TrimPrefix(tc.url, srv.URL), tc.body, status, got, tc.status, tc.contains)
		}
	}
}

// envdHeader is the in-sandbox API's headers for sandbox sb.
func envdHeader(sb created) map[string]string {
	return map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken}
}

func TestFiles(t *testing.T) {
	srv := newServer(t)
	sb := create(t, srv, `{}`)
	files := srv.URL + "/e2b/files"
	h := envdHeader(sb)
	h["Content-Type"] = "application/octet-stream"
	if status, got := call(t, "POST", files+"?path=/home/user/a/raw.bin", h, strings.NewReader("raw\x00bytes")); status != 200 || !strings.Contains(got, `"path":"/workspace/a/raw.bin"`) {
		t.Errorf("POST octet-stream = %d %s", status, got)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, data := range map[string]string{"m/one.txt": "1", "m/two.txt": "2"} {
		w, _ := mw.CreateFormFile("file", name)
		w.Write([]byte(data))
	}
	mw.Close()
	h["Content-Type"] = mw.FormDataContentType()
	if status, got := call(t, "POST", files, h, &body); status != 200 || !strings.Contains(got, "/workspace/m/one.txt") || !strings.Contains(got, "/workspace/m/two.txt") {
		t.Errorf("POST multipart = %d %s", status, got)
	}
	for _, tc := range []struct {
		url    string
		header map[string]string
		status int
		want   string
	}{
		{files + "?path=a/raw.bin", envdHeader(sb), 200, "raw\x00bytes"},
		{files + "?path=/workspace/m/two.txt", envdHeader(sb), 200, "2"},
		{files + "?path=nope", envdHeader(sb), 404, `"code":404`},
		{files + "?path=/etc/passwd", envdHeader(sb), 400, "outside the sandbox's workspace"},
		{files + "?path=a/raw.bin&username=root", envdHeader(sb), 501, "user root"},
		{files + "?path=a/raw.bin", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": "ea_wrong"}, 401, "access token"},
		{srv.URL + "/e2b/health", envdHeader(sb), 204, ""},
		{srv.URL + "/e2b/envs", envdHeader(sb), 501, "not supported"},
		{srv.URL + "/e2b/health", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken, "E2b-Sandbox-Port": "49983"}, 204, ""},
		{srv.URL + "/e2b/", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken, "E2b-Sandbox-Port": "8080"}, 501, "port 8080"},
	} {
		if status, got := call(t, "GET", tc.url, tc.header, nil); status != tc.status || !strings.Contains(got, tc.want) {
			t.Errorf("GET %s = %d %q, want %d with %q", strings.TrimPrefix(tc.url, srv.URL), status, got, tc.status, tc.want)
		}
	}
	call(t, "DELETE", srv.URL+"/e2b/sandboxes/"+sb.SandboxID, apiHeader(sessionsKey), nil)
	if status, got := call(t, "GET", srv.URL+"/e2b/health", envdHeader(sb), nil); status != 502 {
		t.Errorf("GET /health of a killed sandbox = %d %s, want 502", status, got)
	}
}
