package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
)

// Inline limits: small files ride in the manifest (one publish instead of
// an object per file, which keeps a small job's hand-over near one round
// trip); the manifest stays well under the server's max payload.
const (
	inlineFileMax  = 64 << 10
	inlineTotalMax = 256 << 10
)

// manifestObject is the object holding a manifest too large for one
// message; the message then carries only Kind, ID, Attempt and Ref.
const manifestObject = ".manifest.json"

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// MaxBytes bounds what one record carries (DefaultMaxBytes); beyond
	// it, files are left out (named in Manifest.Omitted) rather than
	// failing forever: the job would otherwise be delivered again and
	// again.
	MaxBytes int64
	// MaxFiles bounds the files of one record (DefaultMaxFiles).
	MaxFiles int
	// Worker is this worker's identity (queue.Queue.WorkerID, from its
	// NATS token): its records go under it (ar.records.<worker>.>), and
	// the API node's Mirror accepts a record only from the worker the
	// job's or task's latest delivery went to.
	Worker string
	Logger *slog.Logger
}

// Publisher is a worker's side: it carries record directories to the API
// node.
type Publisher struct {
	cfg        PublisherConfig
	js         jetstream.JetStream
	obs        jetstream.ObjectStore
	log        *slog.Logger
	maxPayload int64
}

// NewPublisher binds the records stream and bucket that the API node's
// Mirror created on the NATS server of nc.
func NewPublisher(ctx context.Context, nc *nats.Conn, cfg PublisherConfig) (*Publisher, error) {
	lim := Limits{MaxBytes: cfg.MaxBytes, MaxFiles: cfg.MaxFiles}.withDefaults()
	cfg.MaxBytes, cfg.MaxFiles = lim.MaxBytes, lim.MaxFiles
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot open JetStream")
	}
	if cfg.Worker == "" || strings.ContainsAny(cfg.Worker, ".*> \t\r\n") {
		return nil, job.Errorf(job.CodeInvalidRequest, "a publisher needs a worker identity (one subject token)").With("worker", cfg.Worker)
	}
	if _, err := js.Stream(ctx, RecordsStream); err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "no records stream on this NATS server (start serve against it first)")
	}
	obs, err := js.ObjectStore(ctx, Bucket)
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "no records bucket on this NATS server (start serve against it first)")
	}
	return &Publisher{cfg: cfg, js: js, obs: obs, log: cfg.Logger.With("component", "remote"), maxPayload: nc.MaxPayload()}, nil
}

// entry is a file to carry.
type entry struct {
	path string // slash-separated, relative
	size int64
}

// Publish carries the record directory dir of id: its files, then the
// manifest. It returns once the server has stored the manifest; an error
// means the record may not have arrived.
func (p *Publisher) Publish(ctx context.Context, k Kind, id string, attempt int, dir string) error {
	entries, omitted, err := p.collect(k, dir)
	if err != nil {
		return err
	}
	if len(omitted) > 0 {
		p.log.Warn("record over its cap; files left out", "kind", k.Name, "id", id, "omitted", len(omitted), "max_bytes", p.cfg.MaxBytes)
	}
	m := Manifest{Kind: k.Name, ID: id, Attempt: attempt, Omitted: omitted, Files: make([]File, 0, len(entries))}
	budget := min(int64(inlineTotalMax), p.maxPayload/4)
	for _, e := range entries {
		f, err := p.carry(ctx, k, id, dir, e, &budget)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, f)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot encode the record manifest")
	}
	if int64(len(b)) > p.maxPayload/2 {
		// Many files: the manifest itself goes to the bucket.
		if _, err := p.obs.PutBytes(ctx, k.object(p.cfg.Worker, id, manifestObject), b); err != nil {
			return job.Wrap(job.CodeQueueClosed, err, "cannot upload the record manifest").With("id", id)
		}
		b, _ = json.Marshal(Manifest{Kind: k.Name, ID: id, Attempt: attempt, Ref: true})
	}
	if _, err := p.js.Publish(ctx, k.subject(p.cfg.Worker, id), b); err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot publish the record").With("id", id)
	}
	return nil
}

// collect lists the regular files k carries from dir, the commit file
// last, leaving out (and naming) those past the caps. Symlinks and other
// special files are not carried.
func (p *Publisher) collect(k Kind, dir string) (entries []entry, omitted []string, err error) {
	commit, err := os.Lstat(filepath.Join(dir, k.Commit))
	if err != nil || !commit.Mode().IsRegular() {
		return nil, nil, job.Errorf(job.CodeRunIOFailed, "record has no %s", k.Commit).With("dir", dir)
	}
	room, files := p.cfg.MaxBytes-commit.Size(), p.cfg.MaxFiles-1
	add := func(rel string, info fs.FileInfo) {
		if !info.Mode().IsRegular() {
			return
		}
		if info.Size() > room || files == 0 {
			omitted = append(omitted, rel)
			return
		}
		room -= info.Size()
		files--
		entries = append(entries, entry{path: rel, size: info.Size()})
	}
	for _, top := range k.Files {
		err := filepath.WalkDir(filepath.Join(dir, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			add(filepath.ToSlash(rel), info)
			return nil
		})
		if err != nil {
			return nil, nil, job.Wrap(job.CodeRunIOFailed, err, "cannot read the record").With("dir", dir)
		}
	}
	return append(entries, entry{path: k.Commit, size: commit.Size()}), omitted, nil
}

// carry reads one file: inline while budget lasts, else as an object.
func (p *Publisher) carry(ctx context.Context, k Kind, id, dir string, e entry, budget *int64) (File, error) {
	fail := func(err error) (File, error) {
		return File{}, job.Wrap(job.CodeRunIOFailed, err, "cannot read a record file").With("path", e.path)
	}
	fh, err := os.Open(filepath.Join(dir, filepath.FromSlash(e.path)))
	if err != nil {
		return fail(err)
	}
	defer fh.Close()
	if e.size <= min(inlineFileMax, *budget) {
		data, err := io.ReadAll(io.LimitReader(fh, e.size+1))
		if err != nil {
			return fail(err)
		}
		if int64(len(data)) == e.size { // unchanged since it was listed
			*budget -= e.size
			sum := sha256.Sum256(data)
			return File{Path: e.path, Size: e.size, SHA256: hex.EncodeToString(sum[:]), Inline: true, Data: data}, nil
		}
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return fail(err)
		}
	}
	h := sha256.New()
	info, err := p.obs.Put(ctx, jetstream.ObjectMeta{Name: k.object(p.cfg.Worker, id, e.path)}, io.TeeReader(fh, h))
	if err != nil {
		return File{}, job.Wrap(job.CodeQueueClosed, err, "cannot upload a record file").With("path", e.path)
	}
	return File{Path: e.path, Size: int64(info.Size), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
