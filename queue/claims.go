package queue

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
)

// Claim kinds: the kind token of a claim's subject (remote.Jobs.Name,
// remote.Tasks.Name).
const (
	ClaimJob  = "job"
	ClaimTask = "task"
)

// claimsMaxAge bounds how long a claim is kept when no record settles it
// (package remote removes the claims of each record it settles).
const claimsMaxAge = 7 * 24 * time.Hour

// Claim says which worker holds a delivery: the API node writes it on
// ar.claims.<worker id>.<kind>.<id> when the server delivers a job or
// task to that worker's inbox. Workers cannot write claims; the subject
// is the binding, the body is for logs.
type Claim struct {
	Attempt int       `json:"attempt"`
	Time    time.Time `json:"time"`
}

// ensureClaims creates (or updates) the claims stream: the latest claim
// of each worker for each id.
func (q *Queue) ensureClaims(ctx context.Context) error {
	_, err := q.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              ClaimsStream,
		Subjects:          []string{ClaimsPrefix + ">"},
		Storage:           jetstream.FileStorage,
		MaxMsgsPerSubject: 1,
		MaxAge:            claimsMaxAge,
	})
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot create the claims stream")
	}
	return nil
}

// observedIDs are the worker identities whose deliveries this API node
// sees: every listed worker's, and that of the shared token (or of no
// token), which workers presenting it have.
func (q *Queue) observedIDs() []string {
	ids := []string{WorkerID(q.cfg.Token)}
	for _, w := range q.cfg.Workers {
		if !slices.Contains(ids, w.ID()) {
			ids = append(ids, w.ID())
		}
	}
	return ids
}

// observeDeliveries subscribes to the inboxes of every worker identity
// this node knows (a worker may receive deliveries on no other subject:
// workerPermissions). Each job or task the server delivers there is
// claimed in that worker's name, so a record is bound to the worker that
// really took the delivery, not to what a worker says of itself.
func (q *Queue) observeDeliveries() error {
	for _, id := range q.observedIDs() {
		if _, err := q.nc.Subscribe(InboxPrefix(id)+".>", func(m *nats.Msg) { q.claim(id, m) }); err != nil {
			return job.Wrap(job.CodeQueueClosed, err, "cannot observe the workers' deliveries")
		}
	}
	return nil
}

// claim records that worker took m, if m is a delivery of the jobs
// stream's consumers (an inbox also carries API replies).
func (q *Queue) claim(worker string, m *nats.Msg) {
	if !strings.HasPrefix(m.Reply, "$JS.ACK.") {
		return
	}
	meta, err := m.Metadata()
	if err != nil || meta.Stream != JobsStream {
		return
	}
	kind, prefix := ClaimJob, jobsPrefix
	switch meta.Consumer {
	case consumerName:
	case taskConsumerName:
		kind, prefix = ClaimTask, tasksPrefix
	default:
		return
	}
	id, ok := strings.CutPrefix(m.Subject, prefix)
	if !ok || id == "" {
		return
	}
	b, _ := json.Marshal(Claim{Attempt: int(meta.NumDelivered), Time: time.Now().UTC()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Stored before this returns; a record that still comes first (a
	// very short job) is tried again by the Mirror until its claim is in.
	_, _ = q.js.Publish(ctx, ClaimsPrefix+worker+"."+kind+"."+id, b)
}

// Claim writes a claim in worker's name for a record the API node
// expects from it that no queue delivery announced: a run of a kept
// sandbox on that worker (package door/sessionapi/sessionremote), which
// the record mirror then accepts from that worker only.
func (q *Queue) Claim(ctx context.Context, worker, kind, id string, attempt int) error {
	b, _ := json.Marshal(Claim{Attempt: attempt, Time: time.Now().UTC()})
	if _, err := q.js.Publish(ctx, ClaimsPrefix+worker+"."+kind+"."+id, b); err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot write a claim").With("id", id)
	}
	return nil
}
