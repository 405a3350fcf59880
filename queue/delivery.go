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

// Delivery is one job (or task) message handed to a worker.
type Delivery struct {
	// JobID is the job's id, or the task's for NextTask.
	JobID   string
	Payload []byte
	// Attempt is the delivery count: 1 the first time, more after a
	// worker died or a restart interrupted the job.
	Attempt int
	msg     jetstream.Msg
}

// KeepAlive resets the redelivery timer while the job runs.
func (d Delivery) KeepAlive() error { return d.msg.InProgress() }

// KeepAliveEvery calls KeepAlive every interval until stop is called.
func (d Delivery) KeepAliveEvery(interval time.Duration) (stop func()) {
	return KeepAliveEvery(d.msg, interval)
}

// KeepAliveEvery tells the server every interval, until stop is called,
// that msg is still being worked on (its redelivery timer restarts).
func KeepAliveEvery(msg jetstream.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress() // a lost keep-alive at worst redelivers; the record decides
			}
		}
	}()
	return func() { close(done) }
}

// Done acknowledges the job: it leaves the queue for good. Call it only
// after the result is recorded.
func (d Delivery) Done(ctx context.Context) error { return d.msg.DoubleAck(ctx) }

// Next waits up to maxWait for the next job.
func (q *Queue) Next(ctx context.Context, maxWait time.Duration) (Delivery, error) {
	return q.next(ctx, q.cons, jobsPrefix, maxWait)
}

// NextTask waits up to maxWait for the next agent task; the payload is
// the task's message (package taskstore). A queue joined without task
// consumer answers ErrNoJob after the wait.
func (q *Queue) NextTask(ctx context.Context, maxWait time.Duration) (Delivery, error) {
	if q.tasks == nil {
		select {
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		case <-time.After(maxWait):
			return Delivery{}, ErrNoJob
		}
	}
	return q.next(ctx, q.tasks, tasksPrefix, maxWait)
}

func (q *Queue) next(ctx context.Context, cons jetstream.Consumer, prefix string, maxWait time.Duration) (Delivery, error) {
	fctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	batch, err := cons.Fetch(1, jetstream.FetchContext(fctx))
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
			JobID:   strings.TrimPrefix(msg.Subject(), prefix),
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

// CancelTask asks every worker to cancel taskID if it is running it; the
// OnCancel function hears TaskCancelKey(taskID).
func (q *Queue) CancelTask(taskID string) error {
	return q.nc.Publish(cancelSubject, []byte(TaskCancelKey(taskID)))
}

// TaskCancelKey is how a task's cancel reaches OnCancel: a job and a
// task may share an id.
func TaskCancelKey(taskID string) string { return "task:" + taskID }

// OnCancel calls fn with each job id a cancel request names.
func (q *Queue) OnCancel(fn func(jobID string)) (stop func(), err error) {
	sub, err := q.nc.Subscribe(cancelSubject, func(m *natsMsg) { fn(string(m.Data)) })
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot subscribe to cancellations")
	}
	return func() { sub.Unsubscribe() }, nil
}
