package runner_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// noImages is an image store that holds nothing.
type noImages struct{}

func (noImages) Resolve(ref string) (backend.Image, func(), error) {
	return backend.Image{}, nil, job.Errorf(job.CodeJobNotFound, "no image %s", ref)
}

// TestImageRefusedWhereItCannotRun: backend.image on a runner without an
// image store, or on a backend that runs no images, is
// validation.invalid_request with field backend.image.
func TestImageRefusedWhereItCannotRun(t *testing.T) {
	f := newFixture(t, nil)
	for name, images := range map[string]runner.ImageResolver{"no store": nil, "local_process": noImages{}} {
		r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store"), DefaultBackend: "local_process",
			Backends: backend.Set{"local_process": localprocess.Backend{}}, Images: images})
		if err != nil {
			t.Fatal(err)
		}
		req := f.request([]string{"true"}, "true")
		req.Backend = job.BackendSpec{Kind: "local_process", Image: "debian:12"}
		err = r.Prepare(&req)
		var jerr *job.Error
		if !errors.As(err, &jerr) || jerr.Code != job.CodeInvalidRequest || jerr.Details["field"] != "backend.image" {
			t.Errorf("%s: Prepare with an image = %v, want %s with field backend.image", name, err, job.CodeInvalidRequest)
		}
		r.Close()
	}
}
