package e2bapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// fileMode is the permission bits of a file the API writes.
const fileMode = 0o644

// writtenJSON is one written file as envd answers it (EntryInfo).
type writtenJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// fileRequest authenticates a /files request and checks its user.
func (d *Door) fileRequest(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := d.sandboxOf(r.Header)
	if err == nil {
		err = checkUser(r.URL.Query().Get("username"))
	}
	if err == nil && r.URL.Query().Has("signature") {
		err = notSupported("signed file URLs")
	}
	if err != nil {
		writeHTTPError(w, err)
		return "", false
	}
	return id, true
}

// readFile answers GET /files?path=P: the file's bytes.
func (d *Door) readFile(w http.ResponseWriter, r *http.Request) {
	id, ok := d.fileRequest(w, r)
	if !ok {
		return
	}
	rel, err := d.workspacePath(r.URL.Query().Get("path"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	var buf bytes.Buffer
	if err := d.cfg.Sessions.ReadFile(r.Context(), id, rel, &buf); err != nil {
		writeHTTPError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	buf.WriteTo(w)
}

// writeFiles answers POST /files: a raw body (application/octet-stream,
// gzip allowed) written to ?path=, or multipart parts named "file",
// each written to ?path= (one part) or its file name.
func (d *Door) writeFiles(w http.ResponseWriter, r *http.Request) {
	id, ok := d.fileRequest(w, r)
	if !ok {
		return
	}
	for k := range r.Header {
		if strings.HasPrefix(k, "X-Metadata-") {
			writeHTTPError(w, notSupported("file metadata ("+k+")"))
			return
		}
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		writeHTTPError(w, job.Errorf(job.CodeUnsupportedMediaType, "a file upload is application/octet-stream or multipart/form-data"))
		return
	}
	target := r.URL.Query().Get("path")
	var out []writtenJSON
	switch mt {
	case "application/octet-stream":
		body := io.Reader(r.Body)
		if enc := r.Header.Get("Content-Encoding"); enc == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				writeHTTPError(w, job.Wrap(job.CodeInvalidRequest, err, "the body is not gzip"))
				return
			}
			body = zr
		} else if enc != "" && enc != "identity" {
			writeHTTPError(w, notSupported("Content-Encoding "+enc))
			return
		}
		f, err := d.writeFile(r, id, target, body)
		if err != nil {
			writeHTTPError(w, err)
			return
		}
		out = append(out, f)
	case "multipart/form-data":
		out, err = d.writeParts(r, id, target, multipart.NewReader(r.Body, params["boundary"]))
		if err != nil {
			writeHTTPError(w, err)
			return
		}
	default:
		writeHTTPError(w, job.Errorf(job.CodeUnsupportedMediaType, "a file upload is application/octet-stream or multipart/form-data, not %s", mt))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeParts writes each "file" part of a multipart upload.
func (d *Door) writeParts(r *http.Request, id, target string, mr *multipart.Reader) ([]writtenJSON, error) {
	var out []writtenJSON
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read the multipart body")
		}
		if part.FormName() != "file" {
			return nil, job.Errorf(job.CodeInvalidRequest, "a multipart upload carries parts named file, not %q", part.FormName())
		}
		// The part's file name is the path: not FileName's base name.
		_, disp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		p := disp["filename"]
		if target != "" {
			if n > 0 {
				return nil, job.Errorf(job.CodeInvalidRequest, "?path= names one file, and the upload has more")
			}
			p = target
		}
		f, err := d.writeFile(r, id, p, part)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, job.Errorf(job.CodeInvalidRequest, "the upload has no file part")
	}
	return out, nil
}

// writeFile writes body (at most the server's file size) to the file p
// names.
func (d *Door) writeFile(r *http.Request, id, p string, body io.Reader) (writtenJSON, error) {
	if p == "" {
		return writtenJSON{}, job.Errorf(job.CodeInvalidRequest, "a file upload needs its path").With("field", "path")
	}
	rel, err := d.workspacePath(p)
	if err != nil {
		return writtenJSON{}, err
	}
	limit := d.cfg.Sessions.MaxFileBytes()
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return writtenJSON{}, job.Wrap(job.CodeInvalidRequest, err, "cannot read the upload")
	}
	if int64(len(data)) > limit {
		return writtenJSON{}, job.Errorf(job.CodeBodyTooLarge, "a file may hold at most %d bytes", limit)
	}
	if err := d.cfg.Sessions.WriteFile(r.Context(), id, rel, data, fileMode); err != nil {
		return writtenJSON{}, err
	}
	return writtenJSON{Name: path.Base(rel), Type: "file", Path: d.sandboxPath(rel)}, nil
}
