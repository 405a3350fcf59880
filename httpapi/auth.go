package httpapi

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// Scopes a token can hold.
const (
	ScopeSubmit = "submit"
	ScopeRead   = "read"
	ScopeCancel = "cancel"
	ScopeAdmin  = "admin"
)

// Tokens maps sha256(token) to the scopes it grants. Tokens themselves
// are never stored.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash   [32]byte
	scopes []string
	name   string
}

// LoadTokens reads a token file: one token per line,
//
//	sha256:<64 hex> <scope>[,<scope>...] [name]
//
// with blank lines and # comments ignored.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read the token file")
	}
	defer f.Close()
	t := &Tokens{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		hexHash, ok := strings.CutPrefix(fields[0], "sha256:")
		raw, err := hex.DecodeString(hexHash)
		if !ok || err != nil || len(raw) != 32 || len(fields) < 2 {
			return nil, job.Errorf(job.CodeInvalidRequest, "token file line %d: want \"sha256:<hex> scopes [name]\"", line)
		}
		e := tokenEntry{scopes: strings.Split(fields[1], ",")}
		copy(e.hash[:], raw)
		for _, s := range e.scopes {
			if !slices.Contains([]string{ScopeSubmit, ScopeRead, ScopeCancel, ScopeAdmin}, s) {
				return nil, job.Errorf(job.CodeInvalidRequest, "token file line %d: unknown scope %q", line, s)
			}
		}
		if len(fields) > 2 {
			e.name = fields[2]
		}
		t.entries = append(t.entries, e)
	}
	return t, sc.Err()
}

// HashToken returns the token-file form of a token's hash.
func HashToken(token string) string {
	s := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(s[:])
}

// authorize checks a bearer token for scope. A nil *Tokens allows all
// (loopback without a token file).
func (t *Tokens) authorize(r *http.Request, scope string) error {
	if t == nil {
		return nil
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return job.Errorf(job.CodeUnauthorized, "a bearer token is required")
	}
	sum := sha256.Sum256([]byte(token))
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], e.hash[:]) == 1 {
			if slices.Contains(e.scopes, scope) || slices.Contains(e.scopes, ScopeAdmin) {
				return nil
			}
			return job.Errorf(job.CodeForbidden, "token lacks the %q scope", scope).With("scope", scope)
		}
	}
	return job.Errorf(job.CodeUnauthorized, "unknown token")
}
