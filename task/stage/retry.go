package stage

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"
)

// Backoff is an exponential retry schedule with full jitter bounds:
// attempt n (from 1) waits a random duration in [d/2, d] where
// d = min(Base * 2^(n-1), Max).
type Backoff struct {
	Base     time.Duration
	Max      time.Duration
	Attempts int
}

// CloneBackoff is seed 004's git clone policy: 3 retries after the first
// attempt, starting at 5 s (5, 10, 20 s before jitter).
var CloneBackoff = Backoff{Base: 5 * time.Second, Max: 20 * time.Second, Attempts: 4}

// Delay returns the wait before retry number n (1-based), drawing jitter
// from r (a float in [0,1)).
func (b Backoff) Delay(n int, r float64) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	return d/2 + time.Duration(r*float64(d/2))
}

// Retry runs fn until it succeeds, fails permanently, or the attempts run
// out; transient reports which errors are worth another try.
func (b Backoff) Retry(ctx context.Context, fn func() error, transient func(error) bool) error {
	var err error
	for n := 1; ; n++ {
		if err = fn(); err == nil || !transient(err) || n >= b.Attempts {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.Delay(n, rand.Float64())):
		}
	}
}

// transientGit are git/network failures that may succeed on retry.
var transientGit = []string{
	"could not resolve host", "connection timed out", "connection refused", "connection reset",
	"early eof", "the remote end hung up unexpectedly", "rpc failed", "operation timed out",
	"temporary failure", "tls handshake timeout", "http 5", "the requested url returned error: 5",
	"unable to access", "gnutls_handshake", "index-pack failed",
}

// permanentGit are failures no retry fixes.
var permanentGit = []string{
	"not found", "does not exist", "authentication failed", "permission denied", "could not read username",
	"remote branch", "couldn't find remote ref", "invalid", "not a git repository", "repository '",
}

// TransientGitError classifies a git error message.
func TransientGitError(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, p := range permanentGit {
		if strings.Contains(msg, p) {
			return false
		}
	}
	for _, t := range transientGit {
		if strings.Contains(msg, t) {
			return true
		}
	}
	return false
}
