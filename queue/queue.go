// Package queue is agent-runner's job queue and live event bus on NATS
// JetStream. By default it embeds a NATS server in-process (no network
// listener) that stores under the run store; the same code can connect to
// an external NATS server instead.
//
//   - Jobs go to a work-queue stream (subject ar.jobs.<job_id>) whose
//     message limit is the queue capacity with discard-new, so a full queue
//     refuses the publish (queue.full) and never drops an accepted job.
//     Workers pull one message at a time, keep it alive while the job runs
//     and acknowledge it only after result.json is written; a worker that
//     dies leaves the message to be redelivered (at-least-once, with the
//     delivery count as the attempt number).
//   - Live events go to a memory events stream, each as one Envelope
//     {time, kind, id, type, payload} on ar.events.<kind>.<id> (a job's
//     status changes and output, an agent task's state and output, a
//     capability run's progress): the queue knows no payload. Stream
//     sequence numbers are the SSE event ids, so a client can resume with
//     Last-Event-ID, and one consumer follows every kind (AllEvents).
//   - Cancellation is a core NATS message on ar.cancel that every worker
//     process hears.
//   - Every client of the embedded server presents a token (auth.go): the
//     API node's own connection and the shared token (Config.Token) have
//     full rights; a worker's token (Config.Workers) may only take and
//     acknowledge deliveries, publish live events, queue child tasks,
//     publish records and serve its own kept sandboxes
//     (ar.sandboxes.{to,from}.<id>.>) under its identity (WorkerID;
//     perms.go). Its deliveries come on its own inboxes, where the API
//     node sees them and writes claims (ar.claims.<worker>.<kind>.<id>,
//     claims.go): the record mirror (package remote) accepts a record
//     only from the worker the latest delivery went to.
package queue

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
)

// errCodeMaxMsgs is JetStream's "maximum messages exceeded" error code,
// returned by a discard-new stream that is full.
const errCodeMaxMsgs = 10077

// Stream and subject names.
const (
	JobsStream   = "AR_JOBS"
	EventsStream = "AR_EVENTS"
	jobsPrefix   = "ar.jobs."
	tasksPrefix  = "ar.tasks."
	// eventsPrefix carries every kind's events: ar.events.<kind>.<id>.
	eventsPrefix  = "ar.events."
	cancelSubject = "ar.cancel"
	consumerName  = "workers"
	// taskConsumerName is the task workers' consumer: tasks run for
	// minutes, so they have slots of their own and never hold up jobs.
	taskConsumerName = "task-workers"
)

// MaxEventsPerJob bounds one job's replayable live events (status changes
// and output chunks); older ones are dropped first. A finished job's output
// stays in its run record.
const MaxEventsPerJob = 10000

// Config configures a Queue.
type Config struct {
	// URL of an external NATS server; empty embeds one.
	URL string
	// StoreDir holds the embedded server's JetStream files.
	StoreDir string
	// Capacity is the most jobs queued or running at once.
	Capacity int64
	// AckWait is how long a job message may go without a keep-alive
	// before it is redelivered (default 10 s; workers refresh it).
	AckWait time.Duration
	// Listen, when set, also exposes the embedded server on this host:port.
	Listen string
	// SyncAlways makes the embedded server fsync every stored message, so
	// an accepted job survives a power loss, not only a process crash.
	SyncAlways bool
	// Token is the credential this client presents (to an external
	// server, or to the embedded server of another process with Join).
	// For the embedded server it is the shared token: a client presenting
	// it has full rights, like the API node's own connection.
	Token string
	// Workers are the worker credentials the embedded server accepts
	// besides Token: each may only do what a worker does, under its own
	// identity (Worker.ID). A listener (Listen) needs Token or Workers.
	Workers []Worker
	// Join binds to the streams an API node created on an external server
	// instead of creating or updating them, so a worker never changes the
	// queue's capacity. It requires URL.
	Join bool
}

// Queue is a connection to the job and event streams.
type Queue struct {
	cfg    Config
	server *server.Server // nil when external
	nc     *nats.Conn
	js     jetstream.JetStream
	jobs   jetstream.Stream
	events jetstream.Stream
	cons   jetstream.Consumer
	tasks  jetstream.Consumer // nil when joining a queue without one
}

// Open starts (or connects to) NATS and makes sure both streams exist.
func Open(ctx context.Context, cfg Config) (*Queue, error) {
	if cfg.Capacity <= 0 {
		cfg.Capacity = 1024
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 10 * time.Second
	}
	if cfg.Join && cfg.URL == "" {
		return nil, job.Errorf(job.CodeInvalidRequest, "joining an existing queue needs a NATS URL")
	}
	q := &Queue{cfg: cfg}
	url := cfg.URL
	var opts []nats.Option
	if url == "" {
		ns, internal, err := embedded(cfg)
		if err != nil {
			return nil, err
		}
		q.server = ns
		url = ns.ClientURL()
		opts = append(opts, nats.InProcessServer(ns), nats.Token(internal))
	} else if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.Token == "" {
		// A token in the URL (nats://TOKEN@host) is this client's
		// identity too.
		cfg.Token = urlToken(cfg.URL)
		q.cfg.Token = cfg.Token
	}
	if cfg.Join {
		// A worker's replies (fetched jobs among them) come on inboxes
		// only its identity may subscribe to.
		opts = append(opts, nats.CustomInboxPrefix(InboxPrefix(q.WorkerID())))
	}
	nc, err := nats.Connect(url, append(opts, nats.Name("agent-runner"), nats.MaxReconnects(-1))...)
	if err != nil {
		q.Close()
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot connect to NATS")
	}
	q.nc = nc
	if q.js, err = jetstream.New(nc); err != nil {
		q.Close()
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot open JetStream")
	}
	ensure := q.ensureStreams
	if cfg.Join {
		ensure = q.joinStreams
	}
	if err := ensure(ctx); err != nil {
		q.Close()
		return nil, err
	}
	if !cfg.Join {
		// An API node binds each delivery to the worker that took it.
		if err := q.ensureClaims(ctx); err != nil {
			q.Close()
			return nil, err
		}
		if err := q.observeDeliveries(); err != nil {
			q.Close()
			return nil, err
		}
	}
	return q, nil
}

// embedded starts the embedded server; every client must present a
// token (authenticator): internal is the one of this process's own
// connection.
func embedded(cfg Config) (ns *server.Server, internal string, err error) {
	if cfg.Listen != "" && cfg.Token == "" && len(cfg.Workers) == 0 {
		return nil, "", job.Errorf(job.CodeInvalidRequest, "a NATS listener needs a credential (a token or worker tokens)")
	}
	auth, internal := newAuthenticator(cfg)
	opts := &server.Options{
		JetStream:                  true,
		StoreDir:                   filepath.Join(cfg.StoreDir, "nats"),
		DontListen:                 cfg.Listen == "",
		NoSigs:                     true,
		ServerName:                 "agent-runner",
		CustomClientAuthentication: auth,
		SyncAlways:                 cfg.SyncAlways,
	}
	if cfg.Listen != "" {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, "", err
		}
		opts.Host, opts.Port = host, port
	}
	ns, err = server.NewServer(opts)
	if err != nil {
		return nil, "", job.Wrap(job.CodeQueueClosed, err, "cannot start embedded NATS")
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, "", job.Errorf(job.CodeQueueClosed, "embedded NATS did not start")
	}
	return ns, internal, nil
}

func (q *Queue) ensureStreams(ctx context.Context) error {
	var err error
	q.jobs, err = q.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: JobsStream,
		// ">" so that an id holding dots (valid for jobs and tasks) is
		// one subject, not a publish nothing hears.
		Subjects:  []string{jobsPrefix + ">", tasksPrefix + ">"},
		Retention: jetstream.WorkQueuePolicy,
		MaxMsgs:   q.cfg.Capacity,
		Discard:   jetstream.DiscardNew,
		Storage:   jetstream.FileStorage,
	})
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot create the jobs stream")
	}
	q.events, err = q.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:     EventsStream,
		Subjects: []string{eventsPrefix + ">"},
		Storage:  jetstream.MemoryStorage,
		MaxAge:   time.Hour,
		MaxBytes: 256 << 20,
		// Each job (task, run) keeps its last MaxEventsPerJob events for
		// replay, so a chatty one cannot push the others' events out.
		MaxMsgsPerSubject: MaxEventsPerJob,
		Discard:           jetstream.DiscardOld,
	})
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot create the events stream")
	}
	q.cons, err = q.jobs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       consumerName,
		FilterSubject: jobsPrefix + ">",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       q.cfg.AckWait,
		MaxAckPending: -1,
	})
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot create the workers consumer")
	}
	q.tasks, err = q.jobs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       taskConsumerName,
		FilterSubject: tasksPrefix + ">",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       q.cfg.AckWait,
		MaxAckPending: -1,
	})
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot create the task workers consumer")
	}
	return nil
}

// joinStreams binds the existing streams and consumer.
func (q *Queue) joinStreams(ctx context.Context) error {
	var err error
	if q.jobs, err = q.js.Stream(ctx, JobsStream); err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "no jobs stream on this NATS server (start serve against it first)")
	}
	if q.events, err = q.js.Stream(ctx, EventsStream); err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "no events stream on this NATS server")
	}
	if q.cons, err = q.jobs.Consumer(ctx, consumerName); err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "no workers consumer on this NATS server")
	}
	// An API node of an earlier version has no task consumer: this
	// worker then runs jobs only (HasTasks).
	if q.tasks, err = q.jobs.Consumer(ctx, taskConsumerName); err != nil {
		q.tasks = nil
	}
	info, err := q.jobs.Info(ctx)
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot read the jobs stream")
	}
	q.cfg.Capacity = info.Config.MaxMsgs
	return nil
}

// Close drains the connection and stops an embedded server.
func (q *Queue) Close() {
	if q.nc != nil {
		q.nc.Drain()
		q.nc.Close()
	}
	if q.server != nil {
		q.server.Shutdown()
		q.server.WaitForShutdown()
	}
}

// WorkerID is this client's identity as a worker: WorkerID of the token
// it presents. Its claims and records go under it.
func (q *Queue) WorkerID() string { return WorkerID(q.cfg.Token) }

// Conn is the underlying NATS connection.
func (q *Queue) Conn() *nats.Conn { return q.nc }

// Enqueue publishes a job. A full queue is job.CodeQueueFull.
func (q *Queue) Enqueue(ctx context.Context, jobID string, payload []byte) error {
	return q.enqueue(ctx, jobsPrefix+jobID, jobID, payload)
}

// EnqueueTask publishes an agent task; it takes a place in the same
// bounded queue as jobs. A full queue is job.CodeQueueFull.
func (q *Queue) EnqueueTask(ctx context.Context, taskID string, payload []byte) error {
	return q.enqueue(ctx, tasksPrefix+taskID, "task:"+taskID, payload)
}

func (q *Queue) enqueue(ctx context.Context, subject, msgID string, payload []byte) error {
	_, err := q.js.Publish(ctx, subject, payload, jetstream.WithMsgID(msgID))
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeMaxMsgs:
		return job.Errorf(job.CodeQueueFull, "job queue is full").With("capacity", q.cfg.Capacity)
	}
	return job.Wrap(job.CodeQueueClosed, err, "cannot enqueue")
}

// Queued reports whether a message for jobID is still in the jobs stream.
func (q *Queue) Queued(ctx context.Context, jobID string) (bool, error) {
	return q.queued(ctx, jobsPrefix+jobID)
}

// QueuedTask reports whether a message for taskID is still in the stream.
func (q *Queue) QueuedTask(ctx context.Context, taskID string) (bool, error) {
	return q.queued(ctx, tasksPrefix+taskID)
}

// HasTasks reports whether this queue has task workers' consumer (every
// queue an API node of this version created does).
func (q *Queue) HasTasks() bool { return q.tasks != nil }

func (q *Queue) queued(ctx context.Context, subject string) (bool, error) {
	_, err := q.jobs.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Remove deletes jobID's message if it is still in the jobs stream, so no
// worker takes it (a queued job canceled: a worker with a store of its own
// could not see the canceled result). A message a worker already holds
// is gone too; that worker hears the cancel instead.
func (q *Queue) Remove(ctx context.Context, jobID string) error {
	return q.remove(ctx, jobsPrefix+jobID)
}

// RemoveTask is Remove for a queued agent task.
func (q *Queue) RemoveTask(ctx context.Context, taskID string) error {
	return q.remove(ctx, tasksPrefix+taskID)
}

func (q *Queue) remove(ctx context.Context, subject string) error {
	msg, err := q.jobs.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot read the jobs stream")
	}
	if err := q.jobs.DeleteMsg(ctx, msg.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return job.Wrap(job.CodeQueueClosed, err, "cannot remove a canceled job from the queue")
	}
	return nil
}

// Depth is the number of jobs and tasks in the stream (queued or
// running).
func (q *Queue) Depth(ctx context.Context) (uint64, error) {
	info, err := q.jobs.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// Capacity is the configured queue capacity.
func (q *Queue) Capacity() int64 { return q.cfg.Capacity }

// urlToken is the token a NATS URL carries as its user (no password).
func urlToken(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return ""
	}
	return u.User.Username()
}

func splitHostPort(addr string) (string, int, error) {
	var host string
	var port int
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			host = addr[:i]
			if _, err := fmt.Sscanf(addr[i+1:], "%d", &port); err != nil {
				return "", 0, job.Errorf(job.CodeInvalidRequest, "bad NATS listen address %q", addr)
			}
			return host, port, nil
		}
	}
	return "", 0, job.Errorf(job.CodeInvalidRequest, "bad NATS listen address %q", addr)
}
