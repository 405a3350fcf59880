package queue

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/job"
)

// Worker is one worker's credential on the embedded server: the SHA-256
// of its token (the token itself is never stored) and a name for logs.
// A client presenting that token may only do what a worker does, under
// its own identity (WorkerID; see workerPermissions).
type Worker struct {
	Name string
	Hash [32]byte
}

// ID is the worker's identity in subjects (ar.records.<id>.>,
// ar.claims.<id>.>): WorkerID of its token.
func (w Worker) ID() string { return hex.EncodeToString(w.Hash[:])[:16] }

// WorkerID is the identity a client presenting token has in subjects:
// the first 16 hex digits of its SHA-256. A worker derives it from its
// own token; the embedded server from the hash in the workers file, and
// it lets that client publish records and claims under this id only.
func WorkerID(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])[:16]
}

// LoadWorkers reads a workers file: one worker per line,
//
//	sha256:<64 hex> <name>
//
// (the hash of the worker's token, as `agent-runner` token files have
// it), with blank lines and # comments ignored. A plaintext token, a
// hash listed twice or a line without a name is refused.
func LoadWorkers(path string) ([]Worker, error) {
	var ws []Worker
	seen := map[[32]byte]bool{}
	err := auth.ReadHashLines(path, "NATS workers file", "sha256:<hex> <worker-name>", func(line int, hash [32]byte, fields []string) error {
		if len(fields) != 1 {
			return job.Errorf(job.CodeInvalidRequest, "NATS workers file line %d: want \"sha256:<hex> <worker-name>\"", line)
		}
		if seen[hash] {
			return job.Errorf(job.CodeInvalidRequest, "NATS workers file line %d: a token listed twice", line)
		}
		seen[hash] = true
		ws = append(ws, Worker{Name: fields[0], Hash: hash})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, job.Errorf(job.CodeInvalidRequest, "NATS workers file lists no worker")
	}
	return ws, nil
}

// Users of the embedded server, as its logs and USER.INFO name them.
const (
	userAPI    = "agent-runner"
	userShared = "shared"
)

// authenticator is the embedded server's client authentication: every
// client presents a token. The API node's own connection (a random token
// that never leaves the process) and the shared Config.Token have full
// rights; a worker's token (Config.Workers) gets workerPermissions.
type authenticator struct {
	api     [32]byte
	shared  *[32]byte
	workers map[[32]byte]Worker
}

func newAuthenticator(cfg Config) (*authenticator, string) {
	internal := rand.Text() + rand.Text()
	a := &authenticator{api: sha256.Sum256([]byte(internal)), workers: map[[32]byte]Worker{}}
	if cfg.Token != "" {
		s := sha256.Sum256([]byte(cfg.Token))
		a.shared = &s
	}
	for _, w := range cfg.Workers {
		a.workers[w.Hash] = w
	}
	return a, internal
}

// Check implements server.Authentication.
func (a *authenticator) Check(c server.ClientAuthentication) bool {
	opts := c.GetOpts()
	if opts == nil || opts.Token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(opts.Token))
	switch {
	case subtle.ConstantTimeCompare(sum[:], a.api[:]) == 1:
		c.RegisterUser(&server.User{Username: userAPI})
	case a.shared != nil && subtle.ConstantTimeCompare(sum[:], a.shared[:]) == 1:
		c.RegisterUser(&server.User{Username: userShared})
	default:
		w, ok := a.workers[sum]
		if !ok {
			return false
		}
		c.RegisterUser(&server.User{Username: w.Name, Permissions: workerPermissions(w.ID())})
	}
	return true
}
