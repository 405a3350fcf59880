package image

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// ImportOptions are Import's options.
type ImportOptions struct {
	// Tags are name:tag references given to the image imported (only
	// when the source holds one image). Without them the names the
	// source records are used (docker save's RepoTags, an OCI index's
	// io.containerd.image.name or a full reference in
	// org.opencontainers.image.ref.name).
	Tags []string
}

// Import reads the OCI image layout directory, OCI layout tar archive or
// docker save archive at src, verifies it and unpacks each of its images
// for this platform that the store does not hold yet, then records and
// tags them. Importing the same image again only updates its tags.
func (s *Store) Import(ctx context.Context, src string, opts ImportOptions) ([]Info, error) {
	var tags []string
	for _, t := range opts.Tags {
		n, err := NormalizeTag(t)
		if err != nil {
			return nil, err
		}
		tags = append(tags, n)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read the image to import").With("path", src)
	}
	var imgs []source
	if fi.IsDir() {
		imgs, err = layoutSources(src)
	} else {
		var done func()
		imgs, done, err = s.archiveSources(src)
		if done != nil {
			defer done()
		}
	}
	if err != nil {
		return nil, err
	}
	if len(tags) > 0 && len(imgs) != 1 {
		return nil, invalid("--tag needs an archive of one image; this one holds %d", len(imgs))
	}
	var out []Info
	for _, img := range imgs {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		names := img.names
		if len(tags) > 0 {
			names = tags
		}
		info, err := s.importOne(ctx, img, names)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

// source is one image of an import, its manifest and config verified.
type source struct {
	kind string
	// digest is the manifest's; "" for a docker archive (the store's
	// own manifest is written after the layers are read).
	digest       string
	config       []byte
	configDigest string
	cfg          *v1.ConfigFile
	layers       []layerSource
	names        []string
}

type layerSource struct {
	digest, mediaType string
	size              int64
	// open returns the layer's blob; compressed says it is the
	// manifest's (possibly compressed) blob, whose digest is checked,
	// rather than the uncompressed tar.
	open       func() (io.ReadCloser, error)
	compressed bool
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// parseConfig reads an image config and checks it against n layers.
func parseConfig(raw []byte, n int) (*v1.ConfigFile, error) {
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, job.Wrap(job.CodeImageInvalid, err, "the image config is not valid JSON")
	}
	if len(cfg.RootFS.DiffIDs) != n {
		return nil, invalid("the image config lists %d layers, the manifest %d", len(cfg.RootFS.DiffIDs), n)
	}
	for _, d := range cfg.RootFS.DiffIDs {
		if d.Algorithm != "sha256" {
			return nil, invalid("layer diff id %s is not sha256", d)
		}
	}
	return cfg, nil
}

// chainID is the OCI ChainID of diffIDs.
func chainID(diffIDs []v1.Hash) string {
	if len(diffIDs) == 0 {
		return sha256Hex(nil)
	}
	chain := diffIDs[0].String()
	for _, d := range diffIDs[1:] {
		chain = sha256Hex([]byte(chain + " " + d.String()))
	}
	return chain
}

func (s *Store) importOne(ctx context.Context, img source, names []string) (Info, error) {
	diffIDs := img.cfg.RootFS.DiffIDs
	info := Info{
		Digest: img.digest, ChainID: chainID(diffIDs), ConfigDigest: img.configDigest, Source: img.kind,
		Config: ImageConfig{
			Env: img.cfg.Config.Env, Cmd: img.cfg.Config.Cmd, Entrypoint: img.cfg.Config.Entrypoint,
			WorkingDir: img.cfg.Config.WorkingDir, User: img.cfg.Config.User, Created: img.cfg.Created.Time,
			Architecture: img.cfg.Architecture, OS: img.cfg.OS,
		},
		Imported: time.Now().UTC(),
	}
	if prev, ok := s.sameChain(info.ChainID); ok && len(prev.Layers) == len(img.layers) {
		// Unpacked before: only the record and tags are new.
		for i, l := range img.layers {
			info.Layers = append(info.Layers, Layer{Digest: l.digest, DiffID: diffIDs[i].String(), MediaType: l.mediaType, Size: prev.Layers[i].Size})
			info.Size += prev.Layers[i].Size
		}
		if info.Digest == "" {
			info.Digest = syntheticDigest(img, info.Layers)
		}
		return s.commit(info, "", names)
	}
	dir, done, err := s.staging("import-")
	if err != nil {
		return Info{}, err
	}
	defer done()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return Info{}, job.Wrap(job.CodeRunIOFailed, err, "cannot make an import directory")
	}
	rfd, err := unix.Open(rootfs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Info{}, job.Wrap(job.CodeRunIOFailed, err, "cannot open an import directory")
	}
	defer unix.Close(rfd)
	u := newUnpacker(rfd, s.caps)
	for i, l := range img.layers {
		if err := ctx.Err(); err != nil {
			return Info{}, err
		}
		size, err := applyLayer(u, l, diffIDs[i])
		if err != nil {
			return Info{}, err
		}
		info.Layers = append(info.Layers, Layer{Digest: l.digest, DiffID: diffIDs[i].String(), MediaType: l.mediaType, Size: size})
		info.Size += size
	}
	if err := u.finish(); err != nil {
		return Info{}, err
	}
	if err := unix.Syncfs(rfd); err != nil {
		return Info{}, job.Wrap(job.CodeRunIOFailed, err, "cannot sync the unpacked image")
	}
	if info.Digest == "" {
		info.Digest = syntheticDigest(img, info.Layers)
	}
	return s.commit(info, rootfs, names)
}

// sameChain finds a record whose rootfs is chainID, with that rootfs in
// place.
func (s *Store) sameChain(chainID string) (Info, bool) {
	if _, err := os.Lstat(s.rootfsPath(chainID)); err != nil {
		return Info{}, false
	}
	ents, _ := os.ReadDir(filepath.Join(s.dir, "images"))
	for _, e := range ents {
		hex, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if info, err := s.readRecord("sha256:" + hex); err == nil && info.ChainID == chainID {
			return info, true
		}
	}
	return Info{}, false
}

// commit renames an unpacked rootfs into place (unless another import
// put the same one there first), writes the record and moves the tags,
// all under the store's lock.
func (s *Store) commit(info Info, rootfs string, names []string) (Info, error) {
	unlock, err := s.lock()
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	dst := s.rootfsPath(info.ChainID)
	if _, err := os.Lstat(dst); err != nil {
		if rootfs == "" {
			return Info{}, job.Errorf(job.CodeRunIOFailed, "the unpacked rootfs went away during the import: import again")
		}
		if err := unix.Renameat2(unix.AT_FDCWD, rootfs, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE); err != nil && !errors.Is(err, unix.EEXIST) {
			return Info{}, job.Wrap(job.CodeRunIOFailed, err, "cannot move the unpacked image into place")
		}
		if d, err := os.Open(filepath.Dir(dst)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	if prev, err := s.readRecord(info.Digest); err == nil {
		info.Imported = prev.Imported
	} else if err := s.writeRecord(info); err != nil {
		return Info{}, err
	}
	idx, err := s.readTags()
	if err != nil {
		return Info{}, err
	}
	changed := false
	for _, n := range names {
		if idx.Tags[n] != info.Digest {
			idx.Tags[n] = info.Digest
			changed = true
		}
	}
	if changed {
		if err := s.writeTags(idx); err != nil {
			return Info{}, err
		}
	}
	info.Tags = tagsOf(idx, info.Digest)
	return info, nil
}

// syntheticDigest is the digest of the OCI manifest the store writes for
// an image that came without one (docker save): its config and its
// layers as uncompressed tars, digest = diff id.
func syntheticDigest(img source, layers []Layer) string {
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	}
	m := struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		Config        desc   `json:"config"`
		Layers        []desc `json:"layers"`
	}{2, string(types.OCIManifestSchema1), desc{string(types.OCIConfigJSON), img.configDigest, int64(len(img.config))}, []desc{}}
	for _, l := range layers {
		m.Layers = append(m.Layers, desc{string(types.OCIUncompressedLayer), l.DiffID, l.Size})
	}
	b, _ := json.Marshal(m)
	return sha256Hex(b)
}

// countingHash hashes and counts what passes through it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// applyLayer reads one layer through its digest checks into u and
// returns its uncompressed size.
func applyLayer(u *unpacker, l layerSource, diffID v1.Hash) (int64, error) {
	rc, err := l.open()
	if err != nil {
		return 0, job.Wrap(job.CodeImageInvalid, err, "a layer blob is missing").With("digest", l.digest)
	}
	defer rc.Close()
	blob := &countingHash{h: sha256.New()}
	var r io.Reader = rc
	if l.compressed {
		d, err := decompress(bufio.NewReader(io.TeeReader(rc, blob)))
		if err != nil {
			return 0, job.Wrap(job.CodeImageInvalid, err, "cannot decompress a layer").With("digest", l.digest)
		}
		defer d.Close()
		r = d
	}
	tarSum := &countingHash{h: sha256.New()}
	tr := io.TeeReader(&streamCap{r: r, u: u}, tarSum)
	if err := u.layer(tr); err != nil {
		return 0, err
	}
	// Read to the end: the digests cover the whole blob.
	if _, err := io.Copy(io.Discard, tr); err != nil {
		return 0, readErr(err, "cannot read a layer")
	}
	if l.compressed {
		if _, err := io.Copy(io.Discard, io.TeeReader(rc, blob)); err != nil {
			return 0, job.Wrap(job.CodeImageInvalid, err, "cannot read a layer").With("digest", l.digest)
		}
		if got := "sha256:" + hex.EncodeToString(blob.h.Sum(nil)); got != l.digest || (l.size > 0 && blob.n != l.size) {
			return 0, invalid("layer blob %s does not match its digest or size (read %s, %d bytes)", l.digest, got, blob.n).With("digest", l.digest)
		}
	}
	if got := "sha256:" + hex.EncodeToString(tarSum.h.Sum(nil)); got != diffID.String() {
		return 0, invalid("layer %s does not match its diff id %s (read %s)", l.digest, diffID, got).With("digest", l.digest)
	}
	return tarSum.n, nil
}

// streamCap bounds the uncompressed bytes of an image's layers: the
// files' declared bytes plus room for headers and padding. A layer that
// holds more (a compression bomb behind the tar's end, which the diff id
// still covers) is image.too_large, read no further.
type streamCap struct {
	r io.Reader
	u *unpacker
}

func (c *streamCap) Read(p []byte) (int, error) {
	max := c.u.caps.MaxBytes + 4096*c.u.caps.MaxEntries + 16<<20
	if c.u.streamed >= max {
		return 0, job.Errorf(job.CodeImageTooLarge, "the image's layers hold more than %d bytes uncompressed", max)
	}
	if rest := max - c.u.streamed; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.u.streamed += int64(n)
	return n, err
}

// decompress picks gzip, zstd or none by the stream's magic bytes.
func decompress(br *bufio.Reader) (io.ReadCloser, error) {
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		return gzip.NewReader(br)
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// One goroutine, ended by Close.
		d, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}
