package remote

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// Retry bounds: a record that fails to apply (an object missing or
// corrupt, a disk error) is tried this many times, with a growing delay,
// before its job is ended with the reason.
const (
	maxTries         = 5
	mirrorAckWait    = 30 * time.Second
	keepAliveEvery   = 5 * time.Second
	maxManifestBytes = 64 << 20
)

// MirrorConfig configures a Mirror.
type MirrorConfig struct {
	Kind Kind
	// Dir is the record directory of id on this node (created if absent).
	Dir    func(id string) string
	Limits Limits
	// Durable fsyncs the commit file and its directory.
	Durable bool
	// Committed, when set, is called after this Mirror wrote a record's
	// commit file and before the manifest is acknowledged (job status,
	// the terminal event). prev is the commit file it replaced
	// (Kind.Replace), nil when there was none.
	Committed func(ctx context.Context, m Manifest, prev []byte)
	// Refused, when set, records why the record of id can never be
	// applied, so its job does not stay unfinished. It is not called
	// when the commit file is already there.
	Refused func(ctx context.Context, id string, attempt int, err *job.Error)
	// Lock, when set, is held while a record is applied (and Refused
	// called), so that another writer of the same directories holding it
	// too (the task status follower) never writes over a final record.
	Lock   sync.Locker
	Logger *slog.Logger
}

// Mirror is the API node's side: it applies the records workers publish
// to this node's own record directories.
type Mirror struct {
	cfg    MirrorConfig
	obs    jetstream.ObjectStore
	cons   jetstream.Consumer
	claims jetstream.Stream
	log    *slog.Logger
}

// NewMirror creates (or updates) the records stream, the bucket and the
// durable consumer of cfg.Kind on the NATS server of nc. Mirrors of one
// kind on several API nodes share the consumer, so they must share one
// store.
func NewMirror(ctx context.Context, nc *nats.Conn, cfg MirrorConfig) (*Mirror, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Limits = cfg.Limits.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot open JetStream")
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:      RecordsStream,
		Subjects:  []string{recordsPrefix + ">"},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
	})
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot create the records stream")
	}
	claims, err := js.Stream(ctx, ClaimsStream)
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "no claims stream on this NATS server (the queue creates it)")
	}
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: Bucket, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot create the records bucket")
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "mirror_" + cfg.Kind.Name,
		// ar.records.<worker>.<kind>.<id>; ">": an id holding dots is
		// several subject tokens.
		FilterSubject: recordsPrefix + "*." + cfg.Kind.Name + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       mirrorAckWait,
	})
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot create the records consumer")
	}
	return &Mirror{cfg: cfg, obs: obs, cons: cons, claims: claims, log: cfg.Logger.With("component", "remote", "kind", cfg.Kind.Name)}, nil
}

// Run applies records until ctx ends.
func (m *Mirror) Run(ctx context.Context) error {
	cc, err := m.cons.Consume(func(msg jetstream.Msg) { m.handle(ctx, msg) })
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot consume records")
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	return nil
}

func (m *Mirror) handle(ctx context.Context, msg jetstream.Msg) {
	worker, id, ok := m.cfg.Kind.parse(msg.Subject())
	if !ok {
		m.log.Error("record refused: its subject names no worker and id", "subject", msg.Subject())
		_ = msg.DoubleAck(ctx)
		return
	}
	log := m.log.With("id", id, "worker", worker)
	holder, err := m.holder(ctx, id)
	if err != nil {
		// Never refused for it: who sent the record is not known.
		if !m.retry(msg, log, err) {
			log.Error("cannot read the record's claims; trying again", "error", err)
			_ = msg.NakWithDelay(maxTries * time.Second)
		}
		return
	}
	man, ref, err := m.manifest(ctx, worker, msg.Data(), id)
	if holder != worker {
		// Not from the worker holding the delivery (a stale attempt's,
		// or forged): after a few tries (a claim may be a moment late),
		// dropped without touching this node's record or ending its job;
		// its own objects go.
		if m.retry(msg, log, errNotHolder) {
			return
		}
		log.Error("record refused: not from the worker holding the delivery; this node's record stays", "holder", holder)
		if err := msg.DoubleAck(ctx); err == nil {
			m.deleteObjects(ctx, worker, man, ref)
		}
		return
	}
	if err != nil {
		m.refuse(ctx, msg, worker, man, ref, id, err)
		return
	}
	stop := keepAlive(msg)
	unlock := m.lock()
	written, prev, err := m.apply(ctx, worker, man)
	if written && m.cfg.Committed != nil {
		m.cfg.Committed(ctx, man, prev)
	}
	unlock()
	stop()
	if ctx.Err() != nil {
		return // not acknowledged: applied again after a restart
	}
	if err != nil {
		var perm permanent
		if errors.As(err, &perm) || !m.retry(msg, log, err) {
			m.refuse(ctx, msg, worker, man, ref, id, err)
		}
		return
	}
	if err := msg.DoubleAck(ctx); err != nil {
		log.Warn("cannot acknowledge a record; it is applied again", "error", err)
		return
	}
	m.deleteObjects(ctx, worker, man, ref)
	m.release(ctx, id)
}

// errNotHolder is why a record from a worker that does not hold its
// delivery waits.
var errNotHolder = errors.New("the record's worker does not hold the delivery (yet)")

// retry asks for msg again after a delay that grows with its tries;
// false when it was tried maxTries times already.
func (m *Mirror) retry(msg jetstream.Msg, log *slog.Logger, err error) bool {
	tries := delivered(msg)
	if tries >= maxTries {
		return false
	}
	log.Warn("cannot apply a record; trying again", "try", tries, "error", err)
	_ = msg.NakWithDelay(time.Duration(tries) * time.Second)
	return true
}

// manifest decodes a message (fetching a manifest too large for one) and
// checks it. Its errors are permanent.
func (m *Mirror) manifest(ctx context.Context, worker string, data []byte, id string) (Manifest, bool, error) {
	k := m.cfg.Kind
	var man Manifest
	if err := json.Unmarshal(data, &man); err != nil {
		return Manifest{}, false, job.Wrap(job.CodeInvalidRequest, err, "undecodable record manifest")
	}
	if man.ID != id || man.Kind != k.Name || !k.ValidID(id) {
		return Manifest{}, false, job.Errorf(job.CodeInvalidRequest, "record manifest names another record").With("id", man.ID)
	}
	ref := man.Ref
	if ref {
		r, err := m.obs.Get(ctx, k.object(worker, id, manifestObject))
		if err != nil {
			return man, ref, job.Wrap(job.CodeRunIOFailed, err, "record manifest object is missing")
		}
		defer r.Close()
		b, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
		if err != nil || len(b) > maxManifestBytes {
			return man, ref, job.Errorf(job.CodeRecordTooLarge, "record manifest is unreadable or larger than %d bytes", maxManifestBytes)
		}
		var full Manifest
		if err := json.Unmarshal(b, &full); err != nil {
			return man, ref, job.Wrap(job.CodeInvalidRequest, err, "undecodable record manifest")
		}
		if full.ID != id || full.Kind != k.Name {
			return man, ref, job.Errorf(job.CodeInvalidRequest, "record manifest names another record").With("id", full.ID)
		}
		man = full
	}
	if err := man.check(k, m.cfg.Limits); err != nil {
		// Only a checked manifest names objects that may be deleted.
		return Manifest{Kind: man.Kind, ID: id, Attempt: man.Attempt}, ref, err
	}
	return man, ref, nil
}

// refuse ends a record that cannot be applied: its job fails with
// run.io_failed, details.reason naming the check that refused it (unless
// it already has a result), the manifest is acknowledged, and its
// objects and the claims of id are deleted. Only a record from the
// worker holding the delivery comes here.
func (m *Mirror) refuse(ctx context.Context, msg jetstream.Msg, worker string, man Manifest, ref bool, id string, err error) {
	jerr := job.AsError(err)
	m.log.Error("record refused; its job ends with the reason", "id", id, "worker", worker, "error", err)
	unlock := m.lock()
	if m.cfg.Kind.ValidID(id) && !m.final(id) && m.cfg.Refused != nil {
		reason := job.Errorf(job.CodeRunIOFailed, "the worker's record could not be carried to this node: %s", jerr.Message).With("reason", string(jerr.Code))
		for k, v := range jerr.Details {
			reason = reason.With(k, v)
		}
		m.cfg.Refused(ctx, id, man.Attempt, reason)
	}
	unlock()
	if err := msg.DoubleAck(ctx); err != nil {
		m.log.Warn("cannot acknowledge a refused record", "id", id, "error", err)
		return
	}
	m.deleteObjects(ctx, worker, man, ref)
	m.release(ctx, id)
}

// final reports whether this node's record of id is final: its commit
// file exists (or, for a kind with Final, says so).
func (m *Mirror) final(id string) bool {
	path := filepath.Join(m.cfg.Dir(id), m.cfg.Kind.Commit)
	if m.cfg.Kind.Final == nil {
		_, err := os.Lstat(path)
		return err == nil
	}
	b, err := ReadCommit(path)
	return err == nil && m.cfg.Kind.Final(b)
}

// lock takes cfg.Lock, if any.
func (m *Mirror) lock() (unlock func()) {
	if m.cfg.Lock == nil {
		return func() {}
	}
	m.cfg.Lock.Lock()
	return m.cfg.Lock.Unlock
}

// permanent is an apply error no retry cures (a commit file that
// Kind.CheckCommit refuses): the record is refused at once.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// deleteObjects removes what a record left in the bucket.
func (m *Mirror) deleteObjects(ctx context.Context, worker string, man Manifest, ref bool) {
	k := m.cfg.Kind
	names := []string{}
	if ref {
		names = append(names, k.object(worker, man.ID, manifestObject))
	}
	for _, f := range man.Files {
		if !f.Inline {
			names = append(names, k.object(worker, man.ID, f.Path))
		}
	}
	for _, name := range names {
		if err := m.obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			m.log.Warn("cannot delete a record object", "object", name, "error", err)
		}
	}
}

// apply writes a checked manifest's files into the record directory, the
// commit file last: created only when absent, or (Kind.Replace) replacing
// one that is not final. It reports whether it wrote the commit file, and
// what that replaced.
func (m *Mirror) apply(ctx context.Context, worker string, man Manifest) (written bool, prev []byte, err error) {
	k := m.cfg.Kind
	if m.final(man.ID) {
		return false, nil, nil // a shared store, or applied before
	}
	dir := m.cfg.Dir(man.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the record directory")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return false, nil, job.Wrap(job.CodeRunIOFailed, err, "cannot open the record directory")
	}
	defer root.Close()
	for _, f := range man.Files {
		if slices.Contains(k.Keep, f.Path) {
			if _, err := root.Lstat(f.Path); err == nil {
				continue
			}
		}
		src, err := m.open(ctx, worker, man.ID, f)
		if err != nil {
			return false, nil, err
		}
		w := fileWriter{root: root, durable: m.cfg.Durable}
		switch {
		case f.Path != k.Commit:
			err = w.replace(src, f)
		case k.Replace:
			prev, err = w.replaceCommit(src, f, man.ID, k)
		default:
			err = w.create(src, f)
		}
		src.Close()
		if errors.Is(err, os.ErrExist) {
			return false, nil, nil // final meanwhile
		}
		if err != nil {
			return false, nil, err
		}
	}
	return true, prev, nil
}

// open returns the content of one file of a record.
func (m *Mirror) open(ctx context.Context, worker, id string, f File) (io.ReadCloser, error) {
	if f.Inline {
		return io.NopCloser(strings.NewReader(string(f.Data))), nil
	}
	r, err := m.obs.Get(ctx, m.cfg.Kind.object(worker, id, f.Path))
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot fetch a record file").With("path", f.Path)
	}
	return r, nil
}

// keepAlive tells the server a long apply is still in progress.
func keepAlive(msg jetstream.Msg) (stop func()) { return queue.KeepAliveEvery(msg, keepAliveEvery) }

func delivered(msg jetstream.Msg) int {
	meta, err := msg.Metadata()
	if err != nil {
		return maxTries
	}
	return int(meta.NumDelivered)
}
