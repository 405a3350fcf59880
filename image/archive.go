package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// openArchive opens a tar archive, gunzipped if it is gzip.
func openArchive(p string) (io.ReadCloser, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(f)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{gz, f}, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{br, f}, nil
}

// archiveSources reads an archive: an OCI layout (it holds oci-layout and
// index.json) is unpacked under tmp/ (regular files and directories only,
// within MaxArchiveBytes) and read as a directory; otherwise a docker save
// archive (manifest.json) is read in place. done removes what was
// unpacked.
func (s *Store) archiveSources(p string) ([]source, func(), error) {
	names, err := archiveNames(p, s.caps.MaxEntries)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case names["oci-layout"] && names["index.json"]:
		dir, done, err := s.staging("archive-")
		if err != nil {
			return nil, nil, err
		}
		if err := s.extractLayout(p, dir); err != nil {
			done()
			return nil, nil, err
		}
		srcs, err := layoutSources(dir)
		return srcs, done, err
	case names["manifest.json"]:
		srcs, err := dockerSources(p)
		return srcs, nil, err
	}
	return nil, nil, invalid("%s is neither an OCI image layout archive (oci-layout, index.json) nor a docker save archive (manifest.json)", filepath.Base(p))
}

// archiveNames lists the clean names of an archive's entries.
func archiveNames(p string, max int64) (map[string]bool, error) {
	rc, err := openArchive(p)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read the image archive")
	}
	defer rc.Close()
	names := map[string]bool{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, job.Wrap(job.CodeImageInvalid, err, "the image archive is not a valid tar")
		}
		if int64(len(names)) >= max {
			return nil, job.Errorf(job.CodeImageTooLarge, "the image archive has more than %d entries", max)
		}
		names[path.Clean(strings.TrimPrefix(hdr.Name, "/"))] = true
	}
}

// extractLayout unpacks an OCI layout archive into dir: directories and
// regular files only, every name checked as a layer's is, the bytes
// capped by MaxArchiveBytes.
func (s *Store) extractLayout(p, dir string) error {
	rc, err := openArchive(p)
	if err != nil {
		return job.Wrap(job.CodeInvalidRequest, err, "cannot read the image archive")
	}
	defer rc.Close()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot open an import directory")
	}
	defer unix.Close(fd)
	u := newUnpacker(fd, Config{MaxBytes: s.caps.MaxArchiveBytes, MaxEntries: s.caps.MaxEntries})
	u.asRoot = false // the layout's files stay the store's
	u.seen = map[string]bool{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return u.finish()
		}
		if err != nil {
			return job.Wrap(job.CodeImageInvalid, err, "the image archive is not a valid tar")
		}
		switch hdr.Typeflag {
		case tar.TypeDir, tar.TypeReg:
		default:
			return invalid("the image archive holds %q of tar type %q: an OCI layout holds only files and directories", hdr.Name, hdr.Typeflag).With("entry", hdr.Name)
		}
		if strings.HasPrefix(path.Base(hdr.Name), whPrefix) {
			return invalid("the image archive holds %q, a whiteout", hdr.Name).With("entry", hdr.Name)
		}
		hdr.Mode = 0o755
		if hdr.Typeflag != tar.TypeDir {
			hdr.Mode = 0o644
		}
		if err := u.entry(hdr, tr); err != nil {
			if job.CodeOf(err) == job.CodeImageTooLarge {
				return job.Errorf(job.CodeImageTooLarge, "the image archive is larger than %d bytes unpacked", s.caps.MaxArchiveBytes)
			}
			return err
		}
	}
}

// dockerSources reads the images of a docker save archive. Such an
// archive has no manifest digests: the config is checked against its file
// name (<hex>.json or blobs/sha256/<hex>), each layer against the
// config's diff id as it is read.
func dockerSources(p string) ([]source, error) {
	opener := func() (io.ReadCloser, error) { return openArchive(p) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, job.Wrap(job.CodeImageInvalid, err, "the docker archive's manifest.json is not valid")
	}
	var out []source
	for _, d := range m {
		var tag *name.Tag
		var names []string
		for _, t := range d.RepoTags {
			n, err := NormalizeTag(t)
			if err != nil {
				continue
			}
			names = append(names, n)
			if tag == nil {
				if nt, err := name.NewTag(t, name.WeakValidation); err == nil {
					tag = &nt
				}
			}
		}
		if len(m) == 1 {
			tag = nil // the only image: no need to find it by name
		} else if tag == nil {
			return nil, invalid("the docker archive holds %d images and one without a tag", len(m))
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, job.Wrap(job.CodeImageInvalid, err, "cannot read the docker archive's image")
		}
		config, err := img.RawConfigFile()
		if err != nil {
			return nil, job.Wrap(job.CodeImageInvalid, err, "cannot read the docker archive's config")
		}
		digest := sha256Hex(config)
		if want := strings.TrimPrefix(strings.TrimSuffix(path.Base(d.Config), ".json"), "sha256:"); want != strings.TrimPrefix(digest, "sha256:") {
			return nil, invalid("config %s does not match its digest (read %s)", d.Config, digest)
		}
		cfg, err := parseConfig(config, len(d.Layers))
		if err != nil {
			return nil, err
		}
		src := source{kind: "docker-archive", config: config, configDigest: digest, cfg: cfg, names: names}
		for _, diffID := range cfg.RootFS.DiffIDs {
			l, err := img.LayerByDiffID(diffID)
			if err != nil {
				return nil, job.Wrap(job.CodeImageInvalid, err, "a layer of the docker archive is missing").With("diff_id", diffID.String())
			}
			src.layers = append(src.layers, layerSource{
				digest: diffID.String(), mediaType: string(typesUncompressed),
				open: l.Uncompressed,
			})
		}
		out = append(out, src)
	}
	return out, nil
}

const typesUncompressed = "application/vnd.oci.image.layer.v1.tar"

// ImportReader imports the archive read from r (an upload): it is
// written under tmp/, at most MaxArchiveBytes of it (image.too_large
// beyond), then imported as Import imports a file, and removed.
func (s *Store) ImportReader(ctx context.Context, r io.Reader, opts ImportOptions) ([]Info, error) {
	dir, done, err := s.staging("upload-")
	if err != nil {
		return nil, err
	}
	defer done()
	p := filepath.Join(dir, "archive")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot store the upload")
	}
	n, err := io.Copy(f, io.LimitReader(r, s.caps.MaxArchiveBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot read the upload")
	}
	if n > s.caps.MaxArchiveBytes {
		return nil, job.Errorf(job.CodeImageTooLarge, "the archive is larger than %d bytes", s.caps.MaxArchiveBytes).With("max_bytes", s.caps.MaxArchiveBytes)
	}
	if n == 0 {
		return nil, invalid("the upload is empty: send an OCI layout or docker save archive")
	}
	return s.Import(ctx, p, opts)
}
