package sessionremote

import (
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/natsconn"
	"github.com/agent-runner/agent-runner/queue"
)

// HeartbeatInterval is how often a host says it is alive.
const HeartbeatInterval = time.Second

// Heartbeat is a host's load, sent every HeartbeatInterval.
type Heartbeat struct {
	// Live counts its sandboxes (live and being created), Max is the
	// most it keeps.
	Live int `json:"live"`
	Max  int `json:"max"`
	// Backends are the kinds a sandbox may name there.
	Backends []string `json:"backends"`
}

// maxBackends bounds a heartbeat's backends list.
const maxBackends = 32

// instance names one worker process: "<worker id>.<instance token>".
type instance string

func (i instance) to() string   { return queue.SandboxesToPrefix + string(i) }
func (i instance) from() string { return queue.SandboxesFromPrefix + string(i) }

// addr is where its sessions door listens.
func (i instance) addr() natsconn.Addr {
	return natsconn.Addr{To: i.to() + ".http", From: i.from() + ".http"}
}

// Message kinds, the last token of a subject.
const (
	kindBeat   = "beat"   // from: Heartbeat
	kindRecord = "record" // from: a session.Record
	kindRun    = "run"    // from: a session.RunEvent
	kindLost   = "lost"   // to: you were declared lost
)

// fromSubject splits ar.sandboxes.from.<worker>.<token>.<kind> into its
// instance and kind.
func fromSubject(subject string) (instance, string, bool) {
	rest, ok := strings.CutPrefix(subject, queue.SandboxesFromPrefix)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || !validToken(parts[0]) || !validToken(parts[1]) {
		return "", "", false
	}
	return instance(parts[0] + "." + parts[1]), parts[2], true
}

// validToken reports whether s is a subject token of letters, digits,
// '-' and '_' (a worker id, an instance token).
func validToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
