// Package e2bapi is serve's E2B-compatible door: the sandbox API of E2B's
// control plane (create, list, get, kill, timeout, pause, connect) and the
// API of E2B's in-sandbox daemon envd (health, file upload and download,
// the Connect-RPC services process.Process and filesystem.Filesystem) over
// the session service (package session), so that the official E2B SDKs
// drive agent-runner's sandboxes after changing three environment
// variables (docs/e2b.md). Both APIs live under one prefix (default
// /e2b): a request that names a sandbox in the E2b-Sandbox-Id header is
// the in-sandbox API, authenticated by that sandbox's access token
// (X-Access-Token); any other is the control plane, authenticated by an
// agent-runner token with the sessions scope sent as X-API-Key. Errors
// take E2B's shapes in one place (errors.go).
package e2bapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// DefaultPrefix is where serve mounts the door.
const DefaultPrefix = "/e2b"

// EnvdVersion is the envd version the door reports: the oldest that
// makes the SDKs use stdin, closeStdin and octet-stream uploads, and
// below the versions whose features the door lacks (file metadata,
// watch entries), which the SDKs then refuse on their side.
const EnvdVersion = "0.5.7"

// envdPort is the port of envd in an E2B sandbox, which the SDKs name
// in E2b-Sandbox-Port.
const envdPort = "49983"

// Headers the SDKs send.
const (
	headerAPIKey      = "X-API-Key"
	headerAccessToken = "X-Access-Token"
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
	headerKeepalive   = "Keepalive-Ping-Interval"
)

// Config is what the door is built from.
type Config struct {
	// Sessions keeps the sandboxes.
	Sessions *session.Service
	// Tokens checks X-API-Key as an agent-runner token holding the
	// sessions scope; nil accepts any key (serve on loopback without a
	// token file).
	Tokens *auth.Tokens
	// Prefix is the path the door is mounted under (default /e2b).
	Prefix string
	// Home is the sandbox user's home directory as E2B programs name it
	// (default /home/user); Workspace the sandbox's workspace as its
	// processes see it (default /workspace, linux_sandbox's). Absolute
	// paths under either are the workspace's; relative paths are
	// relative to it.
	Home, Workspace string
	// Internet is the network of a sandbox created with
	// allow_internet_access true (E2B's default in its Python SDK): the
	// host network where serve allows it, else an allow-list of the
	// whole egress ceiling; nil refuses such a create
	// (policy.network_denied).
	Internet *session.Network
	Logger   *slog.Logger
}

// Door serves the E2B-compatible API.
type Door struct {
	cfg Config
	// key signs sandbox access tokens: a sandbox lives no longer than
	// the serve that holds it, so a key of the process is enough.
	key     [32]byte
	control *http.ServeMux
	envd    *http.ServeMux
	// watchers are the polled file watchers (CreateWatcher).
	watchers watchers
}

// New builds the door.
func New(cfg Config) *Door {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	cfg.Prefix = "/" + strings.Trim(cfg.Prefix, "/")
	if cfg.Home == "" {
		cfg.Home = "/home/user"
	}
	if cfg.Workspace == "" {
		cfg.Workspace = "/workspace"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Door{cfg: cfg, control: http.NewServeMux(), envd: http.NewServeMux()}
	rand.Read(d.key[:])
	d.controlRoutes()
	d.envdRoutes()
	return d
}

// Prefix is the path the door serves under.
func (d *Door) Prefix() string { return d.cfg.Prefix }

// ServeHTTP routes a request under the prefix: to the in-sandbox API
// when it names a sandbox (E2b-Sandbox-Id), else to the control plane.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, d.cfg.Prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		writeHTTPError(w, job.Errorf(job.CodeJobNotFound, "no route %s", r.URL.Path))
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = rest, ""
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	switch {
	case r.Header.Get(headerSandboxID) != "":
		if port := r.Header.Get(headerSandboxPort); port != "" && port != envdPort {
			writeHTTPError(rec, notSupported("reaching port "+port+" of a sandbox (only envd's, "+envdPort+")"))
			break
		}
		d.envd.ServeHTTP(rec, r2)
	default:
		if err := d.authorizeKey(r); err != nil {
			writeHTTPError(rec, err)
			break
		}
		d.control.ServeHTTP(rec, r2)
	}
	if rec.status >= http.StatusInternalServerError {
		d.cfg.Logger.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", rec.status, "sandbox", r.Header.Get(headerSandboxID))
	}
}

// statusWriter notes the status a handler answered; it flushes and
// unwraps so that streams work through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authorizeKey checks the control plane's X-API-Key.
func (d *Door) authorizeKey(r *http.Request) error {
	if d.cfg.Tokens == nil {
		return nil
	}
	key := r.Header.Get(headerAPIKey)
	if key == "" {
		return job.Errorf(job.CodeUnauthorized, "an X-API-Key header holding an agent-runner token with the sessions scope is required")
	}
	probe := &http.Request{Header: http.Header{"Authorization": {"Bearer " + key}}}
	return d.cfg.Tokens.Authorize(probe, auth.ScopeSessions)
}

// accessToken is sandbox id's envd access token.
func (d *Door) accessToken(id string) string {
	m := hmac.New(sha256.New, d.key[:])
	m.Write([]byte(id))
	return "ea_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sandboxOf authenticates an in-sandbox request: the sandbox its
// E2b-Sandbox-Id names, when X-Access-Token is that sandbox's token.
func (d *Door) sandboxOf(h http.Header) (string, error) {
	id := h.Get(headerSandboxID)
	got := h.Get(headerAccessToken)
	if id == "" || got == "" {
		return "", job.Errorf(job.CodeUnauthorized, "the in-sandbox API needs the E2b-Sandbox-Id and X-Access-Token headers")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(d.accessToken(id))) != 1 {
		return "", job.Errorf(job.CodeUnauthorized, "the access token is not sandbox %s's", id)
	}
	return id, nil
}
