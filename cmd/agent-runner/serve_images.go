package main

import (
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

// mountImages opens the image store (<store-dir>/images unless
// --images-dir) and mounts its operator routes, /v1/images (scope admin;
// docs/images.md).
func mountImages(d serveDeps, f imageServeFlags) (*image.Store, error) {
	s, err := image.Open(image.Config{Dir: f.store.dir(d.StoreDir), MaxArchiveBytes: f.maxBytes})
	if err != nil {
		return nil, err
	}
	// Imports a crash cut off, and rootfs directories nothing names.
	if _, err := s.GC(); err != nil {
		return nil, err
	}
	(&imageapi.Door{Store: s, MaxBytes: f.maxBytes}).Routes(d.Mux, d.Auth)
	for _, p := range imageapi.RawBodyPatterns() {
		d.AcceptRawBody(p)
	}
	return s, nil
}
