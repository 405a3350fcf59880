package image

import (
	"bytes"
	"io"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agent-runner/agent-runner/job"
)

// layoutSources reads the images of an OCI layout directory for this
// platform, checking each manifest and config against its digest.
func layoutSources(dir string) ([]source, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, job.Wrap(job.CodeImageInvalid, err, "not an OCI image layout")
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, job.Wrap(job.CodeImageInvalid, err, "not an OCI image layout")
	}
	var out []source
	if err := collect(p, idx, 0, nil, &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, invalid("the layout holds no image for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return out, nil
}

func collect(p layout.Path, idx v1.ImageIndex, depth int, names []string, out *[]source) error {
	if depth > 4 {
		return invalid("image indexes nested too deep")
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return job.Wrap(job.CodeImageInvalid, err, "an image index is not valid")
	}
	for _, d := range im.Manifests {
		if d.Digest.Algorithm != "sha256" {
			return invalid("descriptor %s is not sha256", d.Digest)
		}
		if d.Platform != nil && (d.Platform.OS != runtime.GOOS || d.Platform.Architecture != runtime.GOARCH) {
			continue
		}
		these := append(append([]string(nil), names...), refNames(d.Annotations)...)
		raw, err := readBlob(p, d.Digest, d.Size, 4<<20)
		if err != nil {
			return err
		}
		switch d.MediaType {
		case types.OCIImageIndex, types.DockerManifestList:
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return job.Wrap(job.CodeImageInvalid, err, "an image index is not valid")
			}
			if err := collect(p, child, depth+1, these, out); err != nil {
				return err
			}
		case types.OCIManifestSchema1, types.DockerManifestSchema2:
			src, err := layoutImage(p, d.Digest.String(), raw)
			if err != nil {
				return err
			}
			src.names = these
			*out = append(*out, src)
		}
	}
	return nil
}

// readBlob reads a small blob (a manifest, a config) and checks it.
func readBlob(p layout.Path, h v1.Hash, size, max int64) ([]byte, error) {
	rc, err := p.Blob(h)
	if err != nil {
		return nil, job.Wrap(job.CodeImageInvalid, err, "a blob is missing").With("digest", h.String())
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, job.Wrap(job.CodeImageInvalid, err, "cannot read a blob").With("digest", h.String())
	}
	if int64(len(b)) > max {
		return nil, invalid("blob %s is larger than %d bytes", h, max).With("digest", h.String())
	}
	if sha256Hex(b) != h.String() || (size > 0 && int64(len(b)) != size) {
		return nil, invalid("blob %s does not match its digest or size", h).With("digest", h.String())
	}
	return b, nil
}

func layoutImage(p layout.Path, digest string, raw []byte) (source, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return source{}, job.Wrap(job.CodeImageInvalid, err, "an image manifest is not valid").With("digest", digest)
	}
	if m.Config.Digest.Algorithm != "sha256" {
		return source{}, invalid("config %s is not sha256", m.Config.Digest)
	}
	config, err := readBlob(p, m.Config.Digest, m.Config.Size, 4<<20)
	if err != nil {
		return source{}, err
	}
	cfg, err := parseConfig(config, len(m.Layers))
	if err != nil {
		return source{}, err
	}
	src := source{kind: "oci-layout", digest: digest, config: config, configDigest: m.Config.Digest.String(), cfg: cfg}
	for _, l := range m.Layers {
		if l.Digest.Algorithm != "sha256" {
			return source{}, invalid("layer %s is not sha256", l.Digest)
		}
		h := l.Digest
		src.layers = append(src.layers, layerSource{
			digest: h.String(), mediaType: string(l.MediaType), size: l.Size, compressed: true,
			open: func() (io.ReadCloser, error) { return p.Blob(h) },
		})
	}
	return src, nil
}

// refNames are the names an index descriptor's annotations give.
func refNames(ann map[string]string) []string {
	var out []string
	for _, key := range []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"} {
		v := ann[key]
		if !strings.ContainsAny(v, ":/") {
			continue // a bare tag ("latest") names nothing by itself
		}
		if n, err := NormalizeTag(v); err == nil {
			out = append(out, n)
		}
	}
	return out
}
