package store

import (
	"regexp"

	"github.com/agent-runner/agent-runner/job"
)

// A Kind is one kind of record the store keeps, each kind in a directory
// of its own below the store root. Every kind follows one id rule
// (ValidID), is created by one atomic claim (Records.Claim) and expires
// by one retention (Records.Retain).
type Kind struct {
	// Name names the kind in errors and logs: job, task, agent_run.
	Name string
	// Dir is the kind's directory below the store root.
	Dir string
	// IDField is the JSON field that carries a record's id in errors.
	IDField string
	// requestDigest reads the digest of the request a record was claimed
	// with from its directory; nil reads DigestFile, which the claim
	// writes.
	requestDigest func(dir string) (string, error)
}

// The kinds of record. Jobs keep seed 002's layout (runs/<job_id>/), so
// their digest is computed from request.json rather than stored beside it.
var (
	Jobs           = Kind{Name: "job", Dir: "runs", IDField: "job_id", requestDigest: jobRequestDigest}
	Tasks          = Kind{Name: "task", Dir: "tasks", IDField: "task_id"}
	CapabilityRuns = Kind{Name: "agent_run", Dir: "agent-runs", IDField: "run_id"}
	// Sessions are kept sandboxes (package session), one record each.
	Sessions = Kind{Name: "session", Dir: "sessions", IDField: "id"}
)

// DigestFile holds, in the record of every kind but jobs, the digest of
// the request the record was created from (hex SHA-256): a repeated
// claim of the id compares against it.
const DigestFile = "request.sha256"

// idPattern bounds every record id to a name that is safe as one path
// element: a job id, a task's metadata.id (the same pattern) and a
// capability run's canonical UUID all match it.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidID reports whether id may name a record of any kind. Names the
// store makes for itself (staging and trash directories, lock folders)
// start with "." and never match.
func ValidID(id string) bool {
	return idPattern.MatchString(id) && id != "." && id != ".."
}

// ValidJobID reports whether id may name a run directory: ValidID, the
// one rule of every kind.
func ValidJobID(id string) bool { return ValidID(id) }

// jobRequestDigest is the job.RequestSHA256 of a run's request.json.
func jobRequestDigest(dir string) (string, error) {
	var req job.Request
	if err := readJSONFile(dir, RequestFile, &req); err != nil {
		return "", err
	}
	return job.RequestSHA256(req), nil
}
