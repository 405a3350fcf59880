package anthropicmock

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// DefaultHost is the name the certificate is for when Config.Hosts is empty.
const DefaultHost = "api.anthropic.com"

// maxBody caps the request body the mock reads and records.
const maxBody = 32 << 20

// Config says what a Server plays and for which names it holds a
// certificate.
type Config struct {
	// Hosts are the names (or IP addresses) the leaf certificate is valid
	// for, besides 127.0.0.1; DefaultHost when empty.
	Hosts []string
	// Script is what /v1/messages answers.
	Script Script
	// APIKey, when set, is the key /v1/ requests must carry (x-api-key, or
	// Authorization: Bearer); others get 401 authentication_error, as from
	// the real API. Empty accepts any request.
	APIKey string
	// Listen is the TCP address to serve on; "127.0.0.1:0" when empty.
	// An end-to-end test that pins api.anthropic.com:443 to a loopback
	// address (the gateway's --egress-resolve keeps the port) listens on
	// that address's port 443.
	Listen string
}

// Request is one request the server received.
type Request struct {
	Method string
	Proto  string // HTTP/1.1, or HTTP/2.0 when the client negotiated h2
	Host   string // the Host header
	Path   string
	Query  string
	Header http.Header
	Body   []byte // at most 32 MiB
}

// Server is a running mock. Its methods are safe for concurrent use.
type Server struct {
	cfg   Config
	caPEM []byte
	ln    net.Listener
	srv   *http.Server
	done  chan struct{} // closed when Serve returns

	mu       sync.Mutex
	requests []Request
	answered int // messages answered, for message ids
}

// New starts a Server on a loopback port, serving TLS with a certificate for
// cfg.Hosts signed by a CA of its own (CAPEM).
func New(cfg Config) (*Server, error) {
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		hosts = []string{DefaultHost}
	}
	auth, err := newAuthority(append(append([]string(nil), hosts...), "127.0.0.1"))
	if err != nil {
		return nil, err
	}
	addr := cfg.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("anthropicmock: listen: %w", err)
	}
	s := &Server{cfg: cfg, caPEM: auth.caPEM, ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:   http.HandlerFunc(s.serveHTTP),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{auth.leaf}, MinVersion: tls.VersionTLS12},
	}
	go func() {
		defer close(s.done)
		_ = s.srv.ServeTLS(ln, "", "") // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// CAPEM is the PEM of the CA that signed the server's certificate.
func (s *Server) CAPEM() []byte { return bytes.Clone(s.caPEM) }

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Close stops the server, closing open connections, and waits for it.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.done
}

// record reads r's body and appends r to the log.
func (s *Server) record(r *http.Request) (Request, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	rec := Request{
		Method: r.Method, Proto: r.Proto, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
	}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	return rec, err
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+err.Error())
		return
	}
	if strings.HasPrefix(rec.Path, "/v1/") && !s.authorized(rec.Header) {
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	switch {
	case rec.Method == http.MethodPost && rec.Path == "/v1/messages":
		s.messages(w, rec)
	case rec.Method == http.MethodPost && rec.Path == "/v1/messages/count_tokens":
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(rec.Body)/4 + 1})
	case rec.Method == http.MethodGet && rec.Path == "/v1/models":
		writeJSON(w, http.StatusOK, modelList)
	case rec.Method == http.MethodGet && rec.Path == "/api/hello":
		writeJSON(w, http.StatusOK, map[string]string{"message": "hello"})
	default:
		writeError(w, http.StatusNotFound, "not_found_error", "anthropicmock: no route for "+rec.Method+" "+rec.Path)
	}
}

// authorized reports whether h carries the configured key, or any key when
// none is configured.
func (s *Server) authorized(h http.Header) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	if h.Get("X-Api-Key") == s.cfg.APIKey {
		return true
	}
	return h.Get("Authorization") == "Bearer "+s.cfg.APIKey
}

// messages answers POST /v1/messages with the script's turn for the
// request's conversation.
func (s *Server) messages(w http.ResponseWriter, rec Request) {
	var req messagesRequest
	if err := json.Unmarshal(rec.Body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "body is not a Messages request: "+err.Error())
		return
	}
	n := req.assistantTurns()
	turn, ok := s.cfg.Script.turn(n)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("anthropicmock: the script has %d turns; this request is at turn %d", len(s.cfg.Script), n))
		return
	}
	s.mu.Lock()
	s.answered++
	id := fmt.Sprintf("msg_mock%04d", s.answered)
	s.mu.Unlock()
	model := req.Model
	if model == "" {
		model = "claude-mock"
	}
	input := len(rec.Body)/4 + 1
	w.Header().Set("Request-Id", "req_mock_"+id)
	if !req.Stream {
		writeJSON(w, http.StatusOK, complete(id, model, input, turn))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	_ = stream(eventWriter{w: w, f: f}, id, model, input, turn) // an error means the client left
}

// modelList is GET /v1/models' answer.
var modelList = map[string]any{
	"data": []map[string]string{{
		"type": "model", "id": "claude-sonnet-4-5-20250929",
		"display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z",
	}},
	"has_more": false,
	"first_id": "claude-sonnet-4-5-20250929",
	"last_id":  "claude-sonnet-4-5-20250929",
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

// writeError writes the real API's error shape.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
}
