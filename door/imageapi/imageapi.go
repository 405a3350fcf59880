// Package imageapi is serve's images door: the operator's routes of
// /v1/images over the image store (package image): list, inspect,
// import an uploaded archive, remove. Every route needs the token scope
// "admin" (docs/images.md).
package imageapi

import (
	"errors"
	"net/http"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/image"
	"github.com/agent-runner/agent-runner/job"
)

// DefaultMaxBytes bounds an uploaded archive unless serve says otherwise.
const DefaultMaxBytes = 2 << 30

// Door serves the routes over one store.
type Door struct {
	Store *image.Store
	// MaxBytes bounds an upload (DefaultMaxBytes when 0): beyond it,
	// 413 validation.body_too_large.
	MaxBytes int64
}

type route struct {
	pattern string
	h       func(*Door, http.ResponseWriter, *http.Request)
	raw     bool
}

// A reference may hold "/" (registry.example/team/tool:1): {ref...}.
var routes = []route{
	{pattern: "GET /v1/images", h: (*Door).list},
	{pattern: "POST /v1/images", h: (*Door).importArchive, raw: true},
	{pattern: "GET /v1/images/{ref...}", h: (*Door).inspect},
	{pattern: "DELETE /v1/images/{ref...}", h: (*Door).remove},
}

// Routes registers the routes on mux, each wrapped with
// wrap(auth.ScopeAdmin, h) (serve's Auth).
func (d *Door) Routes(mux *http.ServeMux, wrap func(scope string, h http.Handler) http.Handler) {
	for _, r := range routes {
		h := r.h
		mux.Handle(r.pattern, wrap(auth.ScopeAdmin, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h(d, w, req) })))
	}
}

// Patterns lists the routes Routes registers ("METHOD /path").
func Patterns() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.pattern
	}
	return out
}

// RawBodyPatterns lists the routes whose body is raw bytes (the
// uploaded archive), for httpapi.Server.AcceptRawBody.
func RawBodyPatterns() []string {
	var out []string
	for _, r := range routes {
		if r.raw {
			out = append(out, r.pattern)
		}
	}
	return out
}

func (d *Door) list(w http.ResponseWriter, _ *http.Request) {
	infos, err := d.Store.List()
	reply(w, http.StatusOK, map[string]any{"images": infos}, err)
}

func (d *Door) inspect(w http.ResponseWriter, r *http.Request) {
	info, err := d.Store.Inspect(r.PathValue("ref"))
	reply(w, http.StatusOK, info, err)
}

func (d *Door) remove(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	digest, err := d.Store.Remove(ref)
	reply(w, http.StatusOK, map[string]string{"removed": ref, "digest": digest}, err)
}

// importArchive takes the archive as the raw body; ?tag=name:tag
// (repeatable) names the image.
func (d *Door) importArchive(w http.ResponseWriter, r *http.Request) {
	max := d.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	body := http.MaxBytesReader(w, r.Body, max)
	infos, err := d.Store.ImportReader(r.Context(), body, image.ImportOptions{Tags: r.URL.Query()["tag"]})
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		err = job.Errorf(job.CodeBodyTooLarge, "the archive is larger than %d bytes", max).With("max_bytes", max)
	}
	reply(w, http.StatusCreated, map[string]any{"images": infos}, err)
}

func reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	httpreply.JSON(w, status, v)
}
