package queue

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
)

// ErrNoJob means Next waited and no job arrived.
var ErrNoJob = errors.New("queue: no job")

// Delivery is one job message handed to a worker.
type Delivery struct {
	JobID   string
	Payload []byte
	// Attempt is the delivery count: 1 the first time, more after a
	// worker died or a restart interrupted the job.
	Attempt int
	msg     jetstream.Msg
}

// KeepAlive resets the redelivery timer while the job runs.
func (d Delivery) KeepAlive() error { return d.msg.InProgress() }

// Done acknowledges the job: it leaves the queue for good. Call it only
// after the result is recorded.
func (d Delivery) Done(ctx context.Context) error { return d.msg.DoubleAck(ctx) }

// Next waits up to maxWait for the next job.
func (q *Queue) Next(ctx context.Context, maxWait time.Duration) (Delivery, error) {
	fctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	batch, err := q.cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		if ctx.Err() != nil {
			return Delivery{}, ctx.Err()
		}
		return Delivery{}, job.Wrap(job.CodeQueueClosed, err, "cannot fetch from the job queue")
	}
	if msg, ok := <-batch.Messages(); ok && msg != nil {
		meta, err := msg.Metadata()
		attempt := 1
		if err == nil {
			attempt = int(meta.NumDelivered)
		}
		return Delivery{
			JobID:   strings.TrimPrefix(msg.Subject(), jobsPrefix),
			Payload: msg.Data(),
			Attempt: attempt,
			msg:     msg,
		}, nil
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return Delivery{}, job.Wrap(job.CodeQueueClosed, err, "job queue fetch failed")
	}
	if ctx.Err() != nil {
		return Delivery{}, ctx.Err()
	}
	return Delivery{}, ErrNoJob
}

// Cancel asks every worker to cancel jobID if it is running it.
func (q *Queue) Cancel(jobID string) error {
	return q.nc.Publish(cancelSubject, []byte(jobID))
}

// OnCancel calls fn with each job id a cancel request names.
func (q *Queue) OnCancel(fn func(jobID string)) (stop func(), err error) {
	sub, err := q.nc.Subscribe(cancelSubject, func(m *natsMsg) { fn(string(m.Data)) })
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot subscribe to cancellations")
	}
	return func() { sub.Unsubscribe() }, nil
}
