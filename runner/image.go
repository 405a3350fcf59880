package runner

import (
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// ImageResolver resolves an image reference (name:tag, or sha256:<hex>)
// to an image a backend can build a sandbox's root from (the image
// store, package image/imagestore, implements it). release is called
// once the sandbox made from it is gone: the store keeps the image's
// root file system until then. A reference the store does not hold is
// a coded error (the store's code, e.g. job.not_found, with details).
type ImageResolver interface {
	Resolve(ref string) (img backend.Image, release func(), err error)
}

// checkImage refuses an image a run cannot have: this runner has no
// image store (Config.Images), or the backend b builds no root from
// one. field is the request's field that named it.
func (r *Runner) checkImage(ref string, b backend.Backend, field string) error {
	if ref == "" {
		return nil
	}
	if r.cfg.Images == nil {
		return job.Errorf(job.CodeInvalidRequest, "%s: this runner has no image store, so it runs no images (%q)", field, ref).With("field", field)
	}
	if !b.Capabilities().Images {
		return job.Errorf(job.CodeInvalidRequest, "%s: backend %s cannot run images (linux_sandbox run as root can)", field, b.Kind()).
			With("field", field).With("backend", b.Kind())
	}
	return nil
}

// resolveImage resolves ref through the runner's image store. The error
// is the store's, coded (an uncoded one is backend.setup_failed).
func (r *Runner) resolveImage(ref string) (*backend.Image, func(), error) {
	if r.cfg.Images == nil {
		return nil, func() {}, job.Errorf(job.CodeInvalidRequest, "this runner has no image store, so it runs no images (%q)", ref).With("image", ref)
	}
	img, release, err := r.cfg.Images.Resolve(ref)
	if err != nil {
		if _, ok := err.(*job.Error); ok {
			return nil, func() {}, err
		}
		return nil, func() {}, job.Wrap(job.CodeBackendSetupFailed, err, "cannot resolve image "+ref).With("image", ref)
	}
	if release == nil {
		release = func() {}
	}
	return &img, release, nil
}
