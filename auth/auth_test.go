package auth_test

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/job"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAuthorize(t *testing.T) {
	tokens, err := auth.Load(writeFile(t, "# comment\n\n"+
		auth.Hash("reader")+" read ci-reader\n"+
		auth.Hash("bot")+" submit,read ci-bot\n"+
		auth.Hash("root")+" admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		header, scope string
		want          job.Code // "" = allowed
	}{
		{"", auth.ScopeRead, job.CodeUnauthorized},
		{"Basic cmVhZGVy", auth.ScopeRead, job.CodeUnauthorized},
		{"Bearer ", auth.ScopeRead, job.CodeUnauthorized},
		{"Bearer nope", auth.ScopeRead, job.CodeUnauthorized},
		{"Bearer reader", auth.ScopeRead, ""},
		{"Bearer reader", auth.ScopeSubmit, job.CodeForbidden},
		{"Bearer bot", auth.ScopeSubmit, ""},
		{"Bearer bot", auth.ScopeCancel, job.CodeForbidden},
		{"Bearer root", auth.ScopeCancel, ""},
		{"Bearer root", auth.ScopeAdmin, ""},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		var got job.Code
		if err := tokens.Authorize(r, tt.scope); err != nil {
			got = job.CodeOf(err)
		}
		if got != tt.want {
			t.Errorf("Authorize(%q, %q) = %q, want %q", tt.header, tt.scope, got, tt.want)
		}
	}
	r, _ := http.NewRequest("GET", "http://x/", nil)
	r.Header.Set("Authorization", "Bearer bot")
	if name, err := tokens.Authenticate(r); err != nil || name != "ci-bot" {
		t.Errorf("Authenticate(bot) = %q, %v, want ci-bot", name, err)
	}
}

func TestNilTokensAllowAll(t *testing.T) {
	var tokens *auth.Tokens
	r, _ := http.NewRequest("GET", "http://x/", nil)
	if err := tokens.Authorize(r, auth.ScopeAdmin); err != nil {
		t.Errorf("nil Tokens refused: %v", err)
	}
}

func TestLoadRefuses(t *testing.T) {
	for _, text := range []string{
		"plaintext-token read\n",
		auth.Hash("x") + "\n",
		auth.Hash("x") + " write\n",
		"sha256:abcd read\n",
		"md5:" + strings.Repeat("0", 64) + " read\n",
	} {
		if _, err := auth.Load(writeFile(t, text)); job.CodeOf(err) != job.CodeInvalidRequest {
			t.Errorf("Load(%q) error = %v, want %s", text, err, job.CodeInvalidRequest)
		}
	}
	if _, err := auth.Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

func TestNewTokenIsUniqueAndHashes(t *testing.T) {
	a, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := auth.NewToken()
	if a == b || len(a) < 40 {
		t.Errorf("NewToken() = %q, %q; want two distinct long tokens", a, b)
	}
	if h := auth.Hash(a); !strings.HasPrefix(h, "sha256:") || len(h) != 7+64 {
		t.Errorf("Hash(%q) = %q, want sha256:<64 hex>", a, h)
	}
}

// TestWebSocketTokenSubprotocol: a WebSocket handshake may carry its
// token as the subprotocol base64url.bearer.authorization.k8s.io.<token>
// (a browser cannot set the header); any other request may not.
func TestWebSocketTokenSubprotocol(t *testing.T) {
	tokens, err := auth.Load(writeFile(t, auth.Hash("term")+" sessions\n"))
	if err != nil {
		t.Fatal(err)
	}
	enc := func(tok string) string {
		return auth.WebSocketTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(tok))
	}
	tests := []struct {
		name              string
		method, upgrade   string
		protocols, header string
		want              job.Code
	}{
		{"handshake with the token", "GET", "websocket", "v4.channel.k8s.io, " + enc("term"), "", ""},
		{"handshake, token first", "GET", "websocket", enc("term") + ",v4.channel.k8s.io", "", ""},
		{"handshake with an unknown token", "GET", "websocket", "v4.channel.k8s.io, " + enc("nope"), "", job.CodeUnauthorized},
		{"handshake with a bad encoding", "GET", "websocket", auth.WebSocketTokenPrefix + "!!", "", job.CodeUnauthorized},
		{"handshake without a token", "GET", "websocket", "v4.channel.k8s.io", "", job.CodeUnauthorized},
		{"a plain GET may not use it", "GET", "", enc("term"), "", job.CodeUnauthorized},
		{"a POST may not use it", "POST", "websocket", enc("term"), "", job.CodeUnauthorized},
		{"the header wins over the subprotocol", "GET", "websocket", enc("term"), "Bearer nope", job.CodeUnauthorized},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(tt.method, "http://x/v1/sandboxes/s/processes/1/ws", nil)
		if tt.upgrade != "" {
			r.Header.Set("Upgrade", tt.upgrade)
			r.Header.Set("Connection", "Upgrade")
		}
		r.Header.Set("Sec-WebSocket-Protocol", tt.protocols)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		var got job.Code
		if err := tokens.Authorize(r, auth.ScopeSessions); err != nil {
			got = job.CodeOf(err)
		}
		if got != tt.want {
			t.Errorf("%s: Authorize = %q, want %q", tt.name, got, tt.want)
		}
	}
}
