package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// Sandboxes placed on workers. The API node keeps a record of each in
// its own store (Record.Worker names the worker) while the sandbox
// itself lives on the worker, with the worker's own record: Place claims
// the id before the create goes there, Mirror applies each record the
// worker sends (never to an ended record, never from another worker),
// and WorkerLost ends them all when their worker is gone. List and Get
// answer them as any other; every other call is routed to the worker
// (package door/sessionapi/sessionremote).

// Place claims req's id (which must be set) for a sandbox to be created
// on worker and returns its first record (starting). created is false
// when the id was already taken by the same request; another request
// is job.conflict.
func (s *Service) Place(req CreateRequest, worker string) (Record, bool, error) {
	if !store.ValidID(req.ID) {
		return Record{}, false, job.Errorf(job.CodeInvalidRequest, "id %q is not a valid id (^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$)", req.ID).With("field", "id")
	}
	digest, err := requestDigest(req)
	if err != nil {
		return Record{}, false, err
	}
	now := s.now()
	rec := Record{ID: req.ID, State: StateStarting, Backend: req.Backend, CreatedAt: now, UpdatedAt: now, Metadata: req.Metadata, Worker: worker}
	created, err := s.cfg.Records.Claim(rec.ID, digest, func(dir string) error {
		b, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			return job.Wrap(job.CodeInternal, err, "cannot encode a session record")
		}
		return os.WriteFile(filepath.Join(dir, recordFile), append(b, '\n'), store.RecordFileMode)
	})
	if err != nil || !created {
		return Record{}, false, err
	}
	s.publish(rec)
	return rec, true, nil
}

// Unplace removes the record Place made for id on worker when the
// worker sent nothing for it since (its create was refused there), so
// the id is free again.
func (s *Service) Unplace(id, worker string) {
	s.placing.Lock()
	defer s.placing.Unlock()
	rec, err := read(s.cfg.Records, id)
	if err != nil || rec.Worker != worker || rec.State != StateStarting || !rec.UpdatedAt.Equal(rec.CreatedAt) {
		return
	}
	if err := s.cfg.Records.Remove(id); err != nil {
		s.cfg.Logger.Warn("cannot remove a refused placement", "id", id, "worker", worker, "error", err)
	}
}

// Placed returns sandbox id's record when it is placed on a worker.
func (s *Service) Placed(id string) (Record, bool) {
	if !store.ValidID(id) || s.handle(id) != nil {
		return Record{}, false
	}
	rec, err := read(s.cfg.Records, id)
	if err != nil || rec.Worker == "" {
		return Record{}, false
	}
	return rec, true
}

// Mirror applies rec, a record worker sent of one of its sandboxes: it
// replaces this node's record of it when that sandbox was placed on
// worker and has not ended here. A record for any other sandbox is
// refused (job.conflict), so a worker can only speak for its own.
func (s *Service) Mirror(worker string, rec Record) error {
	s.placing.Lock()
	defer s.placing.Unlock()
	if !store.ValidID(rec.ID) {
		return job.Errorf(job.CodeInvalidRequest, "a sandbox record with an invalid id").With("worker", worker)
	}
	cur, err := read(s.cfg.Records, rec.ID)
	if err != nil {
		return err
	}
	if cur.Worker != worker {
		return job.Errorf(job.CodeJobConflict, "sandbox %s is not placed on worker %s", rec.ID, worker).With("id", rec.ID).With("worker", worker)
	}
	if !cur.State.Live() {
		return nil
	}
	if !slices.Contains(States, rec.State) {
		return job.Errorf(job.CodeInvalidRequest, "sandbox %s: state %q is not a sandbox state", rec.ID, rec.State).With("id", rec.ID)
	}
	rec.Worker = worker
	return s.save(rec)
}

// WorkerLost ends, failed with cause, every live sandbox placed on
// worker, and returns their ids.
func (s *Service) WorkerLost(worker string, cause *job.Error) []string {
	s.placing.Lock()
	defer s.placing.Unlock()
	var ids []string
	for _, rec := range s.placedLive() {
		if rec.Worker != worker {
			continue
		}
		ended(&rec, StateFailed, s.now(), cause)
		if err := s.save(rec); err != nil {
			s.cfg.Logger.Warn("cannot record a lost worker's sandbox", "id", rec.ID, "worker", worker, "error", err)
			continue
		}
		ids = append(ids, rec.ID)
	}
	return ids
}

// PlacedWorkers are the workers holding live sandboxes placed by this
// node.
func (s *Service) PlacedWorkers() []string {
	seen := map[string]bool{}
	var out []string
	for _, rec := range s.placedLive() {
		if !seen[rec.Worker] {
			seen[rec.Worker] = true
			out = append(out, rec.Worker)
		}
	}
	return out
}

// placedLive are the live records placed on workers.
func (s *Service) placedLive() []Record {
	ids, err := s.cfg.Records.List()
	if err != nil {
		s.cfg.Logger.Warn("cannot list sandboxes", "error", err)
		return nil
	}
	var out []Record
	for _, id := range ids {
		rec, err := read(s.cfg.Records, id)
		if err == nil && rec.Worker != "" && rec.State.Live() {
			out = append(out, rec)
		}
	}
	return out
}

// Load is how many sandboxes this process holds (live and being
// created) and the most it may.
func (s *Service) Load() (live, max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live) + len(s.pending), s.cfg.MaxSandboxes
}

// recorded tells Config.Recorded that run runID's record is complete.
func (s *Service) recorded(runID string) {
	if s.cfg.Recorded != nil && runID != "" {
		s.cfg.Recorded(runID)
	}
}
