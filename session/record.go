package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// State is a sandbox's place in its life.
type State string

// The states of a sandbox: starting while it is built, running and
// paused while it lives, then one of the ended states for good.
const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StatePaused   State = "paused"
	StateStopped  State = "stopped" // deleted by its caller
	StateFailed   State = "failed"  // could not start, or died with serve
	StateExpired  State = "expired" // its timeout_s ran out (or idle, or paused too long)
)

// States lists every state, in life order.
var States = []State{StateStarting, StateRunning, StatePaused, StateStopped, StateFailed, StateExpired}

// Live reports whether a sandbox in state s may still be used.
func (s State) Live() bool { return s == StateStarting || s == StateRunning || s == StatePaused }

// Limits are what a sandbox's processes share (job.Limits' fields of the
// same names).
type Limits struct {
	MemoryMB     int64 `json:"memory_mb,omitempty"`
	CPUCount     int64 `json:"cpu_count,omitempty"`
	MaxProcesses int64 `json:"max_processes,omitempty"`
	TmpMB        int64 `json:"tmp_mb,omitempty"`
}

// Network is a sandbox's network: mode "disabled" (the default),
// "allowlist" (through the operator's egress gateway, to AllowedHosts)
// or "host" (where the operator allows it).
type Network struct {
	Mode         string   `json:"mode,omitempty"`
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// Workspace is what a sandbox's workspace starts from: a copy of Path (a
// host directory under serve's --workspace-root), else empty.
type Workspace struct {
	Path string `json:"path,omitempty"`
	// Repository, Branch and Commit: a local git repository cloned as
	// the workspace instead (workspace.go).
	Repository string `json:"repository,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Commit     string `json:"commit,omitempty"`
}

// Record is a sandbox as the store keeps it and the API answers it.
type Record struct {
	ID        string            `json:"id"`
	State     State             `json:"state"`
	Backend   string            `json:"backend"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	EndedAt   *time.Time        `json:"ended_at,omitempty"`
	TimeoutS  int64             `json:"timeout_s"`
	Workspace Workspace         `json:"workspace"`
	Limits    Limits            `json:"limits"`
	Network   Network           `json:"network"`
	Policy    *job.Policy       `json:"policy,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	// Template is the template it was created from; Start says how it
	// was built (StartWarm: claimed from the template's pool, StartCold:
	// created for this request) and StartReason why a create was cold
	// (the Cold* reasons).
	Template string `json:"template,omitempty"`
	// Image is the image its root is made of, as the create named it.
	Image       string `json:"image,omitempty"`
	Start       string `json:"start,omitempty"`
	StartReason string `json:"start_reason,omitempty"`
	// Execs counts the execs run in it; LastRun is the newest one's run
	// id (runs/<id>/).
	Execs   int64  `json:"execs"`
	LastRun string `json:"last_run,omitempty"`
	// Processes counts the background processes started in it (each a
	// run, runs/<id>.proc-<n>/).
	Processes int64 `json:"processes,omitempty"`
	// Error says why a failed sandbox failed.
	Error *job.Error `json:"error,omitempty"`
	// IdleTimeoutS, AutoPause, PausedBy and EndReason: see idle.go.
	IdleTimeoutS int64  `json:"idle_timeout_s,omitempty"`
	AutoPause    bool   `json:"auto_pause,omitempty"`
	PausedBy     string `json:"paused_by,omitempty"`
	EndReason    string `json:"end_reason,omitempty"`
	// OnTimeout ("end" or "pause") and AutoResume: timeout.go. A record
	// written before they existed has neither: "end".
	OnTimeout  string `json:"on_timeout,omitempty"`
	AutoResume bool   `json:"auto_resume,omitempty"`
	// Env is every process's default environment (env.go); Secrets
	// names its secrets, never their values (secrets.go).
	Env     map[string]string `json:"env,omitempty"`
	Secrets []string          `json:"secrets,omitempty"`
	// Usage is what its processes use together, read when it is answered
	// (usage.go); absent where the backend cannot read it.
	Usage *Usage `json:"usage,omitempty"`
	// Worker names the worker that holds the sandbox when it lives in
	// another process (its queue.WorkerID and instance: placed.go); empty
	// for a sandbox of this process.
	Worker string `json:"worker,omitempty"`
}

// recordFile is the record's file in its directory, workspaceDir its
// workspace.
const (
	recordFile   = "session.json"
	workspaceDir = "workspace"
)

// write replaces the record's file atomically.
func write(recs *store.Records, rec Record, durable bool) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return job.Wrap(job.CodeInternal, err, "cannot encode a session record")
	}
	return recs.WriteFile(rec.ID, recordFile, append(b, '\n'), durable)
}

// read reads record id: job.not_found when there is none.
func read(recs *store.Records, id string) (Record, error) {
	if !recs.Exists(id) {
		return Record{}, job.Errorf(job.CodeJobNotFound, "no sandbox %q", id).With("id", id)
	}
	b, err := os.ReadFile(filepath.Join(recs.Path(id), recordFile))
	if err != nil {
		return Record{}, job.Wrap(job.CodeRunIOFailed, err, "cannot read a session record").With("id", id)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, job.Wrap(job.CodeRunIOFailed, err, "corrupt session record").With("id", id)
	}
	return rec, nil
}

// ended puts rec in the ended state st at now, with err as its cause.
func ended(rec *Record, st State, now time.Time, err *job.Error) {
	rec.State, rec.UpdatedAt, rec.Error = st, now, err
	rec.EndedAt = &now
}
