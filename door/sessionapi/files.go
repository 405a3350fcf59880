package sessionapi

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// serveGetFiles answers GET /v1/sandboxes/{id}/files?path=P: a
// directory's listing (JSON; "" or "." the workspace root), a regular
// file's bytes, or with a Range header of one range (bytes=a-b, a-,
// -n) those bytes (206 with Content-Range). A Range the server does not
// take (several ranges, another unit, bad syntax) is ignored: the whole
// file answers, as RFC 9110 lets a server do.
func serveGetFiles(s *session.Service, w http.ResponseWriter, r *http.Request) {
	id, p := r.PathValue("id"), r.URL.Query().Get("path")
	st, err := s.StatFile(r.Context(), id, p)
	switch {
	case job.CodeOf(err) == job.CodeBackendUnavail: // no tree calls: a plain read
	case err != nil:
		httpreply.Error(w, err)
		return
	case st.Type == backend.FileDir:
		list, err := s.ListFiles(r.Context(), id, p)
		reply(w, http.StatusOK, list, err)
		return
	}
	w.Header().Set("Accept-Ranges", "bytes")
	rng, ok := parseRange(r.Header.Get("Range"))
	if !ok {
		var buf bytes.Buffer
		if err := s.ReadFile(r.Context(), id, p, &buf); err != nil {
			httpreply.Error(w, err)
			return
		}
		writeBytes(w, http.StatusOK, &buf)
		return
	}
	var buf bytes.Buffer
	span, err := s.ReadFileRange(r.Context(), id, p, rng, &buf)
	if err != nil {
		if job.CodeOf(err) == job.CodeRangeNotSatisfiable {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", span.Size))
		}
		httpreply.Error(w, err)
		return
	}
	if span.Length == 0 { // an empty file: nothing to say a range of
		writeBytes(w, http.StatusOK, &buf)
		return
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", span.Offset, span.Offset+span.Length-1, span.Size))
	writeBytes(w, http.StatusPartialContent, &buf)
}

func writeBytes(w http.ResponseWriter, status int, buf *bytes.Buffer) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	buf.WriteTo(w)
}

// parseRange reads one HTTP byte range (RFC 9110 14.1.2): ok is false
// for no Range, several ranges, another unit or bad syntax. bytes=-0
// selects nothing and is kept as a range no file satisfies.
func parseRange(h string) (backend.ByteRange, bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	spec = strings.TrimSpace(spec)
	if !found || spec == "" || strings.Contains(spec, ",") {
		return backend.ByteRange{}, false
	}
	first, last, found := strings.Cut(spec, "-")
	if !found {
		return backend.ByteRange{}, false
	}
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return backend.ByteRange{}, false
		}
		if n == 0 {
			return backend.ByteRange{Start: 1<<63 - 1}, true
		}
		return backend.ByteRange{Suffix: n}, true
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || start < 0 {
		return backend.ByteRange{}, false
	}
	if last == "" {
		if start == 0 {
			return backend.ByteRange{Start: 0, End: 0}, true
		}
		return backend.ByteRange{Start: start}, true
	}
	end, err := strconv.ParseInt(last, 10, 64)
	if err != nil || end < start || end == 1<<63-1 {
		return backend.ByteRange{}, false
	}
	return backend.ByteRange{Start: start, End: end + 1}, true
}

// serveStatFile answers GET /v1/sandboxes/{id}/files/stat?path=P: one
// entry, as lstat describes it (a symlink with its target).
func serveStatFile(s *session.Service, w http.ResponseWriter, r *http.Request) {
	st, err := s.StatFile(r.Context(), r.PathValue("id"), r.URL.Query().Get("path"))
	reply(w, http.StatusOK, st, err)
}

// serveRemoveFile answers DELETE /v1/sandboxes/{id}/files?path=P&recursive=B
// with 204.
func serveRemoveFile(s *session.Service, w http.ResponseWriter, r *http.Request) {
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			httpreply.Error(w, job.Errorf(job.CodeInvalidRequest, "recursive must be true or false").With("field", "recursive"))
			return
		}
		recursive = b
	}
	if err := s.RemoveFile(r.Context(), r.PathValue("id"), r.URL.Query().Get("path"), recursive); err != nil {
		httpreply.Error(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// moveRequest is POST /v1/sandboxes/{id}/files/move's body.
type moveRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// serveMoveFile answers POST /v1/sandboxes/{id}/files/move {from, to}
// with the two paths.
func serveMoveFile(s *session.Service, w http.ResponseWriter, r *http.Request) {
	var req moveRequest
	if !decode(w, r, &req) {
		return
	}
	err := s.MoveFile(r.Context(), r.PathValue("id"), req.From, req.To)
	reply(w, http.StatusOK, req, err)
}
