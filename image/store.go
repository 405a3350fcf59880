// Package image is the image store: it imports OCI image layouts
// (directories or tar archives) and docker save archives, verifies every
// blob against its digest, unpacks each image's layers once into a
// content-addressed root file system (whiteouts applied, hostile entries
// refused, setuid and setgid bits cleared, size and entry caps checked
// before anything is written), names images with name:tag references and
// hands backends a leased backend.Image whose rootfs garbage collection
// leaves alone while a sandbox uses it. docs/images.md is its manual.
//
// Layout of a store directory (by default <store-dir>/images):
//
//	tags.json              {"tags": {"name:tag": "sha256:<manifest digest>"}}
//	images/<hex>.json      one record per image (Info), by manifest digest
//	rootfs/<hex>/          one unpacked root per layer chain (ChainID)
//	tmp/                   imports in progress (and archives unpacked)
//	leases/<id>            one flocked file per Resolve not yet released
//	.lock                  flocked while the index or the cache changes
//
// Every record is written atomically (temp file, rename) and a rootfs is
// unpacked under tmp/ and renamed into rootfs/ when complete, so a crash
// leaves at worst a directory under tmp/ that the next GC removes; a
// record is written only after its rootfs is in place.
package image

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// Default caps of a store (Config).
const (
	DefaultMaxBytes        = 8 << 30
	DefaultMaxEntries      = 500_000
	DefaultMaxArchiveBytes = 8 << 30
)

// Config configures a Store. Zero caps take the defaults.
type Config struct {
	// Dir is the store directory (serve's <store-dir>/images).
	Dir string
	// MaxBytes caps the sum of the sizes that an image's layers declare
	// for their files: checked on each tar header, before the file is
	// written (a 10 GB sparse file is refused, not written).
	MaxBytes int64
	// MaxEntries caps the number of entries of an image's layers
	// together (inodes the rootfs may take).
	MaxEntries int64
	// MaxArchiveBytes caps the bytes of an OCI layout archive that
	// Import unpacks before reading it.
	MaxArchiveBytes int64
}

// Store is an image store. Any number of processes may share its
// directory: changes to the index and the cache hold .lock.
type Store struct {
	dir  string
	caps Config
}

// Info is what the store knows of one image: its record, and what
// Inspect and List answer.
type Info struct {
	// Digest is the manifest digest (sha256:<hex>); for a docker save
	// archive without an OCI index, the digest of the OCI manifest the
	// store writes for it (config and uncompressed layers).
	Digest string   `json:"digest"`
	Tags   []string `json:"tags"`
	// Size is the sum of the layers' uncompressed sizes.
	Size int64 `json:"size"`
	// Layers are the layer blobs in order.
	Layers []Layer `json:"layers"`
	// ChainID names the unpacked rootfs (rootfs/<hex>), the same for any
	// two images with the same layers.
	ChainID string `json:"chain_id"`
	// ConfigDigest is the config blob's digest (docker's image id).
	ConfigDigest string      `json:"config_digest"`
	Config       ImageConfig `json:"config"`
	Imported     time.Time   `json:"imported"`
	// Source is the format imported: "oci-layout" or "docker-archive".
	Source string `json:"source"`
}

// Layer is one layer of an image.
type Layer struct {
	// Digest is the blob's digest as the manifest names it, DiffID the
	// digest of its uncompressed tar.
	Digest    string `json:"digest"`
	DiffID    string `json:"diff_id"`
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size"`
}

// ImageConfig is the part of an image's config a sandbox starts from.
type ImageConfig struct {
	Env          []string  `json:"env,omitempty"`
	Cmd          []string  `json:"cmd,omitempty"`
	Entrypoint   []string  `json:"entrypoint,omitempty"`
	WorkingDir   string    `json:"working_dir,omitempty"`
	User         string    `json:"user,omitempty"`
	Created      time.Time `json:"created,omitzero"`
	Architecture string    `json:"architecture,omitempty"`
	OS           string    `json:"os,omitempty"`
}

type tagIndex struct {
	Tags map[string]string `json:"tags"`
}

// Open creates the store's layout under cfg.Dir if needed.
func Open(cfg Config) (*Store, error) {
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "image store directory is not usable")
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxArchiveBytes <= 0 {
		cfg.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	// 0711 like the run store: a sandbox's mounter must reach a rootfs
	// below, nobody but the store's user may list or write.
	for _, d := range []string{abs, filepath.Join(abs, "images"), filepath.Join(abs, "rootfs"), filepath.Join(abs, "tmp"), filepath.Join(abs, "leases")} {
		if err := os.MkdirAll(d, store.PrivateDirMode); err != nil {
			return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the image store").With("dir", d)
		}
	}
	cfg.Dir = abs
	return &Store{dir: abs, caps: cfg}, nil
}

// Dir is the store's absolute directory.
func (s *Store) Dir() string { return s.dir }

// lock takes the store's exclusive lock (blocking) and returns its
// release. flock locks belong to an open file, so two goroutines of one
// process exclude each other too.
func (s *Store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot open the image store lock")
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot lock the image store")
	}
	return func() { f.Close() }, nil
}

func (s *Store) readTags() (tagIndex, error) {
	idx := tagIndex{Tags: map[string]string{}}
	b, err := os.ReadFile(filepath.Join(s.dir, "tags.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return idx, job.Wrap(job.CodeRunIOFailed, err, "cannot read the image index")
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return idx, job.Wrap(job.CodeRunIOFailed, err, "corrupt image index tags.json")
	}
	if idx.Tags == nil {
		idx.Tags = map[string]string{}
	}
	return idx, nil
}

func (s *Store) writeTags(idx tagIndex) error {
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return job.Wrap(job.CodeInternal, err, "cannot encode the image index")
	}
	return store.WriteFileAtomic(filepath.Join(s.dir, "tags.json"), append(b, '\n'), store.RecordFileMode)
}

func hexOf(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

func (s *Store) recordPath(digest string) string {
	return filepath.Join(s.dir, "images", hexOf(digest)+".json")
}

func (s *Store) rootfsPath(chainID string) string {
	return filepath.Join(s.dir, "rootfs", hexOf(chainID))
}

func (s *Store) readRecord(digest string) (Info, error) {
	var info Info
	b, err := os.ReadFile(s.recordPath(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return info, job.Errorf(job.CodeImageNotFound, "image %s is not in the store", digest).With("ref", digest)
	}
	if err != nil {
		return info, job.Wrap(job.CodeRunIOFailed, err, "cannot read an image record")
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, job.Wrap(job.CodeRunIOFailed, err, "corrupt image record").With("digest", digest)
	}
	return info, nil
}

func (s *Store) writeRecord(info Info) error {
	info.Tags = nil
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return job.Wrap(job.CodeInternal, err, "cannot encode an image record")
	}
	return store.WriteFileAtomic(s.recordPath(info.Digest), append(b, '\n'), store.RecordFileMode)
}

// resolve maps a checked reference to a digest with the index read.
func resolve(idx tagIndex, ref string) (string, bool) {
	if IsDigest(ref) {
		return ref, true
	}
	d, ok := idx.Tags[ref]
	return d, ok
}

// tagsOf lists the tags of digest, sorted.
func tagsOf(idx tagIndex, digest string) []string {
	out := []string{}
	for t, d := range idx.Tags {
		if d == digest {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// List returns every image in the store, by digest, with its tags.
func (s *Store) List() ([]Info, error) {
	idx, err := s.readTags()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, "images"))
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot list images")
	}
	out := []Info{}
	for _, e := range ents {
		hex, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !IsDigest("sha256:"+hex) {
			continue
		}
		info, err := s.readRecord("sha256:" + hex)
		if err != nil {
			if job.CodeOf(err) == job.CodeImageNotFound {
				continue
			}
			return nil, err
		}
		info.Tags = tagsOf(idx, info.Digest)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Imported.After(out[j].Imported) })
	return out, nil
}

// Inspect describes the image ref names.
func (s *Store) Inspect(ref string) (Info, error) {
	ref, err := checkRef(ref)
	if err != nil {
		return Info{}, err
	}
	idx, err := s.readTags()
	if err != nil {
		return Info{}, err
	}
	digest, ok := resolve(idx, ref)
	if !ok {
		return Info{}, notFound(ref)
	}
	info, err := s.readRecord(digest)
	if err != nil {
		if job.CodeOf(err) == job.CodeImageNotFound {
			return Info{}, notFound(ref)
		}
		return Info{}, err
	}
	info.Tags = tagsOf(idx, digest)
	return info, nil
}

func notFound(ref string) error {
	return job.Errorf(job.CodeImageNotFound, "image %q is not in the store", ref).With("ref", ref)
}

// Remove untags ref: a name:tag loses its tag, and the image its record
// when that was its last tag; a digest loses every tag and its record.
// The rootfs goes with the next GC (Remove runs one) unless another image
// with the same layers or a lease still uses it. It returns the digest.
func (s *Store) Remove(ref string) (string, error) {
	ref, err := checkRef(ref)
	if err != nil {
		return "", err
	}
	digest, err := s.untag(ref)
	if err != nil {
		return "", err
	}
	_, err = s.GC()
	return digest, err
}

// untag is Remove's change of the index and records, under the lock.
func (s *Store) untag(ref string) (string, error) {
	unlock, err := s.lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	idx, err := s.readTags()
	if err != nil {
		return "", err
	}
	digest, ok := resolve(idx, ref)
	if _, recErr := os.Stat(s.recordPath(digest)); !ok || (IsDigest(ref) && recErr != nil) {
		return "", notFound(ref)
	}
	if IsDigest(ref) {
		for t, d := range idx.Tags {
			if d == digest {
				delete(idx.Tags, t)
			}
		}
	} else {
		delete(idx.Tags, ref)
	}
	if err := s.writeTags(idx); err != nil {
		return "", err
	}
	if len(tagsOf(idx, digest)) == 0 {
		if err := os.Remove(s.recordPath(digest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", job.Wrap(job.CodeRunIOFailed, err, "cannot remove an image record")
		}
	}
	return digest, nil
}

// Resolve leases the image ref names for a sandbox: until release is
// called (or the process exits), GC keeps its rootfs even if the image is
// removed. The Image's RootFS must never be written.
func (s *Store) Resolve(ref string) (backend.Image, func(), error) {
	ref, err := checkRef(ref)
	if err != nil {
		return backend.Image{}, nil, err
	}
	unlock, err := s.lock()
	if err != nil {
		return backend.Image{}, nil, err
	}
	defer unlock()
	idx, err := s.readTags()
	if err != nil {
		return backend.Image{}, nil, err
	}
	digest, ok := resolve(idx, ref)
	if !ok {
		return backend.Image{}, nil, notFound(ref)
	}
	info, err := s.readRecord(digest)
	if err != nil {
		if job.CodeOf(err) == job.CodeImageNotFound {
			err = notFound(ref)
		}
		return backend.Image{}, nil, err
	}
	root := s.rootfsPath(info.ChainID)
	if _, err := os.Lstat(root); err != nil {
		return backend.Image{}, nil, job.Wrap(job.CodeRunIOFailed, err, "the image's rootfs is missing: import it again").With("ref", ref)
	}
	release, err := s.lease(info.ChainID)
	if err != nil {
		return backend.Image{}, nil, err
	}
	img := backend.Image{
		Ref: ref, Digest: digest, RootFS: root,
		Env: info.Config.Env, WorkingDir: info.Config.WorkingDir, User: info.Config.User,
	}
	return img, release, nil
}
