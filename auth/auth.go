// Package auth checks bearer tokens against a token file that stores only
// their SHA-256 hashes, each with a set of scopes (submit, read, cancel,
// admin, sessions). Every HTTP door of agent-runner (jobs API, task API, MCP) goes
// through the same Tokens.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// Scopes a token can hold. Admin implies every other scope.
const (
	ScopeSubmit = "submit"
	ScopeRead   = "read"
	ScopeCancel = "cancel"
	ScopeAdmin  = "admin"
	// ScopeSessions grants every /v1/sandboxes route: creating, using
	// and deleting kept sandboxes (docs/sessions.md).
	ScopeSessions = "sessions"
)

// Scopes lists every valid scope.
var Scopes = []string{ScopeSubmit, ScopeRead, ScopeCancel, ScopeAdmin, ScopeSessions}

// Tokens maps sha256(token) to the scopes it grants. Tokens themselves
// are never stored. A nil *Tokens allows everything (a loopback server
// without a token file).
type Tokens struct {
	entries []entry
}

type entry struct {
	hash   [32]byte
	scopes []string
	name   string
}

// Load reads a token file: one token per line,
//
//	sha256:<64 hex> <scope>[,<scope>...] [name]
//
// with blank lines and # comments ignored. A line holding anything but a
// hash (a plaintext token) is refused.
func Load(path string) (*Tokens, error) {
	t := &Tokens{}
	err := ReadHashLines(path, "token file", "sha256:<hex> scopes [name]", func(line int, hash [32]byte, fields []string) error {
		e := entry{hash: hash, scopes: strings.Split(fields[0], ",")}
		for _, s := range e.scopes {
			if !slices.Contains(Scopes, s) {
				return job.Errorf(job.CodeInvalidRequest, "token file line %d: unknown scope %q", line, s)
			}
		}
		if len(fields) > 1 {
			e.name = fields[1]
		}
		t.entries = append(t.entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Hash returns the token-file form of a token's hash ("sha256:<hex>").
func Hash(token string) string {
	s := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(s[:])
}

// NewToken returns a random token (32 bytes, URL-safe base64).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "art_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Authenticate checks that r carries a known bearer token (in its
// Authorization header, or on a WebSocket handshake in the token
// subprotocol, WebSocketTokenPrefix) and returns its name. It is auth.unauthorized otherwise.
func (t *Tokens) Authenticate(r *http.Request) (string, error) {
	if t == nil {
		return "", nil
	}
	e, err := t.lookup(r)
	if err != nil {
		return "", err
	}
	return e.name, nil
}

// Authorize checks that r carries a known bearer token holding scope (or
// admin): auth.unauthorized for a missing or unknown token, auth.forbidden
// for a token without the scope.
func (t *Tokens) Authorize(r *http.Request, scope string) error {
	if t == nil {
		return nil
	}
	e, err := t.lookup(r)
	if err != nil {
		return err
	}
	if slices.Contains(e.scopes, scope) || slices.Contains(e.scopes, ScopeAdmin) {
		return nil
	}
	return job.Errorf(job.CodeForbidden, "token lacks the %q scope", scope).With("scope", scope)
}

func (t *Tokens) lookup(r *http.Request) (entry, error) {
	token, ok := bearer(r)
	if !ok || token == "" {
		return entry{}, job.Errorf(job.CodeUnauthorized, "a bearer token is required")
	}
	sum := sha256.Sum256([]byte(token))
	var found *entry
	for i := range t.entries {
		// Compare against every entry, so timing does not reveal which
		// line matched.
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].hash[:]) == 1 {
			found = &t.entries[i]
		}
	}
	if found == nil {
		return entry{}, job.Errorf(job.CodeUnauthorized, "unknown token")
	}
	return *found, nil
}
