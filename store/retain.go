package store

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Ending is what a kind says about one of its records for retention.
type Ending struct {
	// Terminal says the record will not change any more.
	Terminal bool
	// At is when it became terminal (its last update).
	At time.Time
	// Keep is how long a terminal record is kept from At; 0 keeps it.
	Keep time.Duration
}

// Expiry is one kind's part in retention: how to read a record's ending,
// and what to do before one is removed.
type Expiry struct {
	// Ended reads record id's ending; an error leaves the record (and is
	// told to Skipped).
	Ended func(id string) (Ending, error)
	// Busy, when set, reports a record this process has in progress
	// whose files may not say so yet; it is never removed.
	Busy func(id string) bool
	// Release, when set, frees what a record holds beyond its files (a
	// mounted workspace) before it is removed; an error keeps the record.
	Release func(id string) error
	// Skipped, when set, hears of each record left because Ended or
	// Release failed.
	Skipped func(id string, err error)
}

// staleStaging is the age after which a staging or trash directory
// (".claim-*", ".trash-*") is taken to be left by a process that died: a
// live claim or removal takes milliseconds.
const staleStaging = time.Hour

// Retain removes the terminal records whose retention age has passed
// (Ending.Keep from Ending.At) and returns their ids. A record in
// progress is never removed: one whose lock a process holds (Lock), one
// e.Busy reports, and one Ended does not call terminal. Staging and
// trash directories left by a process that died are removed too.
func (r *Records) Retain(now time.Time, e Expiry) ([]string, error) {
	r.sweep(now)
	ids, err := r.List()
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, id := range ids {
		if (e.Busy != nil && e.Busy(id)) || r.Locked(id) {
			continue
		}
		end, err := e.Ended(id)
		if err != nil {
			if e.Skipped != nil {
				e.Skipped(id, err)
			}
			continue
		}
		if !end.Terminal || end.Keep <= 0 || now.Sub(end.At) <= end.Keep {
			continue
		}
		if e.Release != nil {
			if err := e.Release(id); err != nil {
				if e.Skipped != nil {
					e.Skipped(id, err)
				}
				continue
			}
		}
		if err := r.Remove(id); err != nil {
			return removed, job.Wrap(job.CodeRunIOFailed, err, "cannot remove an expired "+r.kind.Name).With(r.kind.IDField, id)
		}
		removed = append(removed, id)
	}
	return removed, nil
}

// sweep removes staging and trash directories older than staleStaging.
func (r *Records) sweep(now time.Time) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return
	}
	for _, en := range entries {
		name := en.Name()
		if !strings.HasPrefix(name, claimPrefix) && !strings.HasPrefix(name, trashPrefix) {
			continue
		}
		if fi, err := en.Info(); err == nil && now.Sub(fi.ModTime()) > staleStaging {
			os.RemoveAll(filepath.Join(r.dir, name))
		}
	}
}
