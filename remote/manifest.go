package remote

import (
	"encoding/hex"
	"strings"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/safepath"
)

// Stream, bucket and subject names.
const (
	// RecordsStream is the work-queue stream of manifests.
	RecordsStream = queue.RecordsStream
	// Bucket is the object store bucket of record files.
	Bucket = queue.RecordsBucket
	// ClaimsStream is the stream of claims (ar.claims.<worker>.<kind>.<id>).
	ClaimsStream  = queue.ClaimsStream
	recordsPrefix = queue.RecordsPrefix
	claimsPrefix  = queue.ClaimsPrefix
)

// Defaults of the receiving side's caps.
const (
	DefaultMaxBytes = 2 << 30
	DefaultMaxFiles = 100_000
)

// Manifest is the "record ready" message: every file of one record, the
// commit file last.
type Manifest struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Attempt int    `json:"attempt,omitempty"`
	Files   []File `json:"files"`
	// Omitted are files the worker left behind because the record was
	// over its cap (they are named, so the gap is visible).
	Omitted []string `json:"omitted,omitempty"`
	// Ref says the whole manifest is the object <kind>/<id>/.manifest.json
	// (too large for one message); the message carries no files.
	Ref bool `json:"ref,omitempty"`
}

// File is one file of a record.
type File struct {
	// Path is slash-separated, relative to the record directory.
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Inline files travel in Data; the others are the object
	// <kind>/<id>/<path> of the bucket.
	Inline bool   `json:"inline,omitempty"`
	Data   []byte `json:"data,omitempty"`
}

// Limits caps what a Mirror accepts of one record.
type Limits struct {
	MaxBytes int64 // total file bytes (DefaultMaxBytes)
	MaxFiles int   // files (DefaultMaxFiles)
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// check validates a manifest received for kind k: the id, every path (clean,
// relative, under an entry k carries, no file also used as a directory),
// sizes and hashes well formed, the caps, and exactly one commit file,
// last. Its errors are permanent: the same manifest never passes.
func (m Manifest) check(k Kind, lim Limits) error {
	lim = lim.withDefaults()
	if m.Kind != k.Name || !k.ValidID(m.ID) {
		return job.Errorf(job.CodeInvalidRequest, "record names no valid %s id", k.Name).With("id", m.ID)
	}
	if m.Ref || len(m.Files) == 0 || m.Files[len(m.Files)-1].Path != k.Commit {
		return job.Errorf(job.CodeInvalidRequest, "record does not end with %s", k.Commit)
	}
	if commit := m.Files[len(m.Files)-1]; (k.Replace || k.CheckCommit != nil) && commit.Size > maxCommitBytes {
		return job.Errorf(job.CodeRecordTooLarge, "record's %s is larger than %d bytes", k.Commit, maxCommitBytes)
	}
	if len(m.Files) > lim.MaxFiles {
		return job.Errorf(job.CodeRecordTooLarge, "record has more than %d files", lim.MaxFiles).With("files", len(m.Files))
	}
	files := map[string]bool{}
	dirs := map[string]bool{}
	var total int64
	for _, f := range m.Files {
		p, err := safepath.Clean(f.Path)
		if err != nil || p != f.Path || p == "." {
			return job.Errorf(job.CodePathEscape, "record path is not a clean relative path").With("path", f.Path)
		}
		top, _, nested := strings.Cut(p, "/")
		if !k.carried(top) || (nested && top == k.Commit) {
			return job.Errorf(job.CodePathEscape, "record path is outside what a %s record carries", k.Name).With("path", p)
		}
		if files[p] || dirs[p] {
			return job.Errorf(job.CodeInvalidRequest, "record names a path twice").With("path", p)
		}
		files[p] = true
		for i := strings.IndexByte(p, '/'); i >= 0; i = next(p, i) {
			if files[p[:i]] {
				return job.Errorf(job.CodeInvalidRequest, "record uses a file as a directory").With("path", p)
			}
			dirs[p[:i]] = true
		}
		if f.Size < 0 || f.Size > lim.MaxBytes-total {
			return job.Errorf(job.CodeRecordTooLarge, "record is larger than %d bytes", lim.MaxBytes).With("path", p)
		}
		total += f.Size
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 || f.SHA256 != strings.ToLower(f.SHA256) {
			return job.Errorf(job.CodeInvalidRequest, "record file has no SHA-256").With("path", p)
		}
		if (!f.Inline && len(f.Data) > 0) || (f.Inline && int64(len(f.Data)) != f.Size) {
			return job.Errorf(job.CodeInvalidRequest, "record file's inline data does not match its size").With("path", p)
		}
	}
	return nil
}

// next is the index of the '/' after i in p, or -1.
func next(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
