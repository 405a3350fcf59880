package worker

import (
	"context"
	"time"

	"github.com/agent-runner/agent-runner/queue"
)

// TaskRunner runs the agent tasks the queue delivers (package taskstore
// implements it).
type TaskRunner interface {
	// RunQueued runs the task of one delivery (its id, the message
	// payload, the delivery count) to a terminal state and records it. A
	// redelivered task that had started ends failed as interrupted rather
	// than run twice. ctx ends with a cause coded run.interrupted when the
	// worker shuts down. It returns an error only when the task could not
	// be taken up at all (its record unreadable); the message is then
	// left for another delivery.
	RunQueued(ctx context.Context, taskID string, payload []byte, attempt int) error
}

// handleTask runs one task delivery: registered to hear its cancel, its
// message kept alive while it runs, its record handed over
// (cfg.TaskRecorded) once it is terminal, then acknowledged.
func (p *Pool) handleTask(ctx context.Context, d queue.Delivery) {
	log := p.log.With("task_id", d.JobID, "attempt", d.Attempt)
	taskCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := queue.TaskCancelKey(d.JobID)
	p.mu.Lock()
	p.running[key] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.running, key)
		p.mu.Unlock()
	}()
	stop := d.KeepAliveEvery(time.Second)
	err := p.cfg.Tasks.RunQueued(taskCtx, d.JobID, d.Payload, d.Attempt)
	stop()
	if err != nil {
		log.Error("task could not be taken up; it is left for another delivery", "error", err)
		return
	}
	// The record goes out even when shutdown ended the task (ctx done).
	if !p.handOver(context.WithoutCancel(ctx), d, p.cfg.TaskRecorded, log) {
		return
	}
	if err := d.Done(context.Background()); err != nil {
		log.Error("task ack failed; its next delivery finds it finished", "error", err)
		return
	}
	log.Info("task finished")
}
