package remote

import (
	"strings"

	"github.com/agent-runner/agent-runner/store"
)

// Kind is one sort of record directory that travels: which top-level
// entries of the directory are carried (a directory is carried whole) and
// which file commits the record.
type Kind struct {
	// Name is one subject token and object name prefix: "job", "task".
	Name string
	// Files are the top-level names carried besides Commit; a missing one
	// is left out.
	Files []string
	// Commit is the top-level file written last on the receiving side and
	// never replaced there.
	Commit string
	// Keep are top-level files the receiving side writes only when it
	// has none (the request an API node stored when it accepted the job).
	Keep []string
	// ValidID reports whether an id may name a record directory.
	ValidID func(id string) bool
	// Replace says the receiving side already has a commit file of its
	// own (a task's state.json, pending since the submit): the record's
	// replaces it, unless Final reports it final. Otherwise the commit
	// file is only ever created.
	Replace bool
	// Final, when set, reports whether the receiving side's commit file
	// (its content) is final: a record arriving then is not applied.
	// Without it, a commit file that exists is final.
	Final func(commit []byte) bool
	// CheckCommit, when set, checks a record's commit file before it
	// takes its name on the receiving side; an error refuses the record.
	CheckCommit func(id string, commit []byte) error
}

// Jobs is the job run record: what GET /v1/jobs/{id}, its artifacts and
// downloads read, the request for nodes that never saw it, and the egress
// audit. The workspace snapshot stays on the worker (a replay on the API
// node starts from the original workspace). egressFile is the runner's
// audit (runner.EgressFile; a test holds them equal).
var Jobs = Kind{
	Name:    "job",
	Files:   []string{store.RequestFile, store.StdoutFile, store.StderrFile, egressFile, store.ArtifactsDir},
	Commit:  store.ResultFile,
	Keep:    []string{store.RequestFile},
	ValidID: store.ValidJobID,
}

// egressFile is the job record's egress audit, runner.EgressFile.
const egressFile = "egress.jsonl"

// carried reports whether top is an entry k carries.
func (k Kind) carried(top string) bool {
	if top == k.Commit {
		return true
	}
	for _, f := range k.Files {
		if f == top {
			return true
		}
	}
	return false
}

// subject is the records subject of one id published by worker (a
// worker's identity, queue.WorkerID: one subject token).
func (k Kind) subject(worker, id string) string {
	return recordsPrefix + worker + "." + k.Name + "." + id
}

// parse splits a records subject of k into its worker and id.
func (k Kind) parse(subject string) (worker, id string, ok bool) {
	worker, rest, ok := strings.Cut(strings.TrimPrefix(subject, recordsPrefix), ".")
	if !ok || worker == "" {
		return "", "", false
	}
	id, ok = strings.CutPrefix(rest, k.Name+".")
	return worker, id, ok && id != ""
}

// object is the object name of one file of a record worker published:
// each worker's objects are its own, so deleting those of a refused
// record never touches another's.
func (k Kind) object(worker, id, path string) string {
	return worker + "/" + k.Name + "/" + id + "/" + path
}
