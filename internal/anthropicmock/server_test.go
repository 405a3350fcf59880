package anthropicmock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testKey = "sk-ant-test"

// startMock starts a mock with a two-turn script and returns it with a
// client that trusts its CA and dials it for every name.
func startMock(t *testing.T) (*Server, *http.Client) {
	t.Helper()
	s, err := New(Config{
		APIKey: testKey,
		Script: Script{
			{Blocks: []Block{ToolUse("toolu_1", "Write", map[string]string{"file_path": "/w/hello.txt", "content": "hi"})}},
			{Blocks: []Block{Text("done")}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CAPEM()) {
		t.Fatal("CAPEM holds no certificate")
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, s.Addr())
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return s, &http.Client{Transport: tr}
}

func post(t *testing.T, c *http.Client, path, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://api.anthropic.com"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestMessagesNotStreaming(t *testing.T) {
	_, c := startMock(t)
	resp := post(t, c, "/v1/messages", testKey, `{"model":"claude-x","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	var m struct {
		Type       string `json:"type"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.Model != "claude-x" || m.StopReason != "tool_use" || len(m.Content) != 1 ||
		m.Content[0].Name != "Write" || string(m.Content[0].Input) != `{"content":"hi","file_path":"/w/hello.txt"}` {
		t.Errorf("message = %+v, want turn 0's Write tool_use with stop_reason tool_use", m)
	}
}

func TestMessagesStreaming(t *testing.T) {
	_, c := startMock(t)
	body := `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[]},{"role":"user","content":[]}]}`
	resp := post(t, c, "/v1/messages", testKey, body)
	if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, "text/event-stream") {
		t.Errorf("Content-Type = %q, want text/event-stream", got)
	}
	events, err := readEvents(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, e := range events {
		var d struct {
			Delta struct {
				Text       string `json:"text"`
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(e.Data), &d); err != nil {
			t.Fatal(err)
		}
		text.WriteString(d.Delta.Text)
		if e.Name == "message_delta" && d.Delta.StopReason != "end_turn" {
			t.Errorf("stop_reason = %q, want end_turn", d.Delta.StopReason)
		}
	}
	if got := text.String(); got != "done" {
		t.Errorf("streamed text = %q, want turn 1's %q", got, "done")
	}
	if last := events[len(events)-1].Name; last != "message_stop" {
		t.Errorf("last event = %q, want message_stop", last)
	}
}

func TestRoutes(t *testing.T) {
	_, c := startMock(t)
	tests := []struct {
		method, path, key, body string
		wantStatus              int
		wantErrType             string
	}{
		{"POST", "/v1/messages", "", `{}`, 401, "authentication_error"},
		{"POST", "/v1/messages", "sk-ant-other", `{}`, 401, "authentication_error"},
		{"POST", "/v1/messages", testKey, `not json`, 400, "invalid_request_error"},
		{"POST", "/v1/messages", testKey, `{"messages":[{"role":"assistant"},{"role":"assistant"}]}`, 400, "invalid_request_error"},
		{"POST", "/v1/messages/count_tokens", testKey, `{"messages":[]}`, 200, ""},
		{"GET", "/v1/models", testKey, ``, 200, ""},
		{"GET", "/api/hello", "", ``, 200, ""},
		{"GET", "/api/claude_code/settings", testKey, ``, 404, "not_found_error"},
		{"POST", "/api/event_logging/v2/batch", testKey, `{}`, 404, "not_found_error"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, "https://api.anthropic.com"+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if tt.key != "" {
			req.Header.Set("X-Api-Key", tt.key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		json.Unmarshal(b, &e)
		if resp.StatusCode != tt.wantStatus || e.Error.Type != tt.wantErrType {
			t.Errorf("%s %s (key %q) = %d %s, want %d %q", tt.method, tt.path, tt.key, resp.StatusCode, b, tt.wantStatus, tt.wantErrType)
		}
	}
}

func TestBearerKeyIsAccepted(t *testing.T) {
	_, c := startMock(t)
	req, _ := http.NewRequest("POST", "https://api.anthropic.com/v1/messages/count_tokens", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Authorization: Bearer <key> = %d, want 200", resp.StatusCode)
	}
}

func TestRequestsAreRecorded(t *testing.T) {
	s, c := startMock(t)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	post(t, c, "/v1/messages?beta=true", testKey, body)
	post(t, c, "/api/event_logging/v2/batch", "", `{"events":[]}`)

	type seen struct{ Method, Proto, Host, Path, Query, Key, Body string }
	var got []seen
	for _, r := range s.Requests() {
		got = append(got, seen{r.Method, r.Proto, r.Host, r.Path, r.Query, r.Header.Get("X-Api-Key"), string(r.Body)})
	}
	want := []seen{
		{"POST", "HTTP/1.1", "api.anthropic.com", "/v1/messages", "beta=true", testKey, body},
		{"POST", "HTTP/1.1", "api.anthropic.com", "/api/event_logging/v2/batch", "", "", `{"events":[]}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}

	// Requests returns copies: changing one changes nothing recorded.
	first := s.Requests()[0]
	first.Header.Set("X-Api-Key", "changed")
	first.Body[0] = 'X'
	if r := s.Requests()[0]; r.Header.Get("X-Api-Key") != testKey || r.Body[0] != '{' {
		t.Error("changing a returned Request changed the record")
	}
}

func TestCertificateNames(t *testing.T) {
	s, err := New(Config{Hosts: []string{"api.anthropic.com", "api.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM())
	tests := []struct {
		name   string
		wantOK bool
	}{
		{"api.anthropic.com", true},
		{"api.example.test", true},
		{"127.0.0.1", true},
		{"statsig.anthropic.com", false},
	}
	for _, tt := range tests {
		conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: pool, ServerName: tt.name})
		if err == nil {
			conn.Close()
		}
		if (err == nil) != tt.wantOK {
			t.Errorf("TLS to %s: %v, want ok=%v", tt.name, err, tt.wantOK)
		}
	}
	// An ordinary client, without the mock's CA, refuses the certificate.
	if conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{ServerName: "api.anthropic.com"}); err == nil {
		conn.Close()
		t.Error("TLS without the mock's CA succeeded, want a verification error")
	}
}

func TestCloseStopsServing(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	s.Close()
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Errorf("dial %s after Close succeeded, want refused", addr)
	}
}
