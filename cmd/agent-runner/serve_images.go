package main

import (
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/door/imageapi"
	"github.com/agent-runner/agent-runner/image"
)

// imageServeFlags are serve's image store flags: --images-dir and
// --image-max-bytes.
type imageServeFlags struct {
	store    imageStoreFlags
	maxBytes int64
}

func (f *imageServeFlags) register(fs *pflag.FlagSet) {
	f.store.register(fs, false)
	fs.Int64Var(&f.maxBytes, "image-max-bytes", imageapi.DefaultMaxBytes, "largest image archive POST /v1/images takes (and the store unpacks from an OCI layout archive)")
}

// openImages opens the image store (<store-dir>/images unless
// --images-dir) and collects what a crash left: imports it cut off and
// rootfs directories nothing names. serve's runner resolves the images
// requests name through it (runner.Config.Images).
func openImages(storeDir string, f imageServeFlags) (*image.Store, error) {
	dir, err := filepath.Abs(f.store.dir(storeDir))
	if err != nil {
		return nil, err
	}
	s, err := image.Open(image.Config{Dir: dir, MaxArchiveBytes: f.maxBytes})
	if err != nil {
		return nil, err
	}
	if _, err := s.GC(); err != nil {
		return nil, err
	}
	return s, nil
}

// mountImages mounts the image store's operator routes, /v1/images
// (scope admin; docs/images.md).
func mountImages(d serveDeps, s *image.Store, f imageServeFlags) {
	(&imageapi.Door{Store: s, MaxBytes: f.maxBytes}).Routes(d.Mux, d.Auth)
	for _, p := range imageapi.RawBodyPatterns() {
		d.AcceptRawBody(p)
	}
}
