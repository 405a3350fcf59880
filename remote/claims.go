package remote

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
)

// holder is the worker whose claim of id is the latest: the one the
// server last delivered the job or task to, as the API node saw it
// (queue's claims; workers cannot write them). "" when none is known.
func (m *Mirror) holder(ctx context.Context, id string) (string, error) {
	msg, err := m.claims.GetLastMsgForSubject(ctx, m.claimFilter(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", job.Wrap(job.CodeQueueClosed, err, "cannot read the claims stream")
	}
	worker, _, _ := strings.Cut(strings.TrimPrefix(msg.Subject, claimsPrefix), ".")
	return worker, nil
}

// release removes the claims of a settled record.
func (m *Mirror) release(ctx context.Context, id string) {
	if err := m.claims.Purge(ctx, jetstream.WithPurgeSubject(m.claimFilter(id))); err != nil {
		m.log.Warn("cannot remove a settled record's claims", "id", id, "error", err)
	}
}

// claimFilter matches every worker's claim of id.
func (m *Mirror) claimFilter(id string) string {
	return claimsPrefix + "*." + m.cfg.Kind.Name + "." + id
}
