package e2bapi

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// maxControlBody bounds a control-plane request body.
const maxControlBody = 1 << 20

// controlRoutes are E2B's sandbox routes this door serves; any other
// path is answered 501, naming it.
func (d *Door) controlRoutes() {
	m := d.control
	m.HandleFunc("POST /sandboxes", d.create)
	m.HandleFunc("POST /v2/sandboxes", d.create)
	m.HandleFunc("GET /sandboxes", d.list)
	m.HandleFunc("GET /v2/sandboxes", d.list)
	m.HandleFunc("GET /sandboxes/{id}", d.get)
	m.HandleFunc("DELETE /sandboxes/{id}", d.kill)
	m.HandleFunc("POST /sandboxes/{id}/timeout", d.timeout)
	m.HandleFunc("POST /sandboxes/{id}/refreshes", d.refresh)
	m.HandleFunc("POST /sandboxes/{id}/pause", d.pause)
	m.HandleFunc("POST /sandboxes/{id}/resume", d.connect)
	m.HandleFunc("POST /sandboxes/{id}/connect", d.connect)
	m.HandleFunc("POST /v2/sandboxes/{id}/connect", d.connect)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, notSupported(r.Method+" "+r.URL.Path))
	})
}

// decodeBody reads a JSON body into v, refusing fields v does not name;
// an empty body leaves v as it is.
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return job.Errorf(job.CodeUnsupportedMediaType, "the body must be application/json, not %s", ct)
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	if err != nil {
		return job.Wrap(job.CodeInvalidRequest, err, "cannot read the body")
	}
	if len(body) > maxControlBody {
		return job.Errorf(job.CodeBodyTooLarge, "the body is larger than %d bytes", maxControlBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if r.Header.Get("Content-Type") == "" {
		return job.Errorf(job.CodeUnsupportedMediaType, "a body needs Content-Type application/json")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return job.Wrap(job.CodeInvalidRequest, err, "the body is not what this route takes (fields this server does not support are refused by name)")
	}
	return nil
}

// live is sandbox id's record when it is running or paused: E2B knows
// no ended sandbox, so an ended one is not found.
func (d *Door) live(id string) (session.Record, error) {
	rec, err := d.cfg.Sessions.Get(id)
	if err != nil {
		return rec, err
	}
	if !rec.State.Live() {
		return rec, job.Errorf(job.CodeJobNotFound, "sandbox %s is %s", id, rec.State).With("id", id)
	}
	return rec, nil
}

func (d *Door) create(w http.ResponseWriter, r *http.Request) {
	var b createBody
	if err := decodeBody(r, &b); err != nil {
		writeHTTPError(w, err)
		return
	}
	req, err := sessionRequest(b, d.cfg.Internet, d.cfg.Sessions.HasTemplate)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	rec, _, err := d.cfg.Sessions.Create(r.Context(), req)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, d.sandbox(rec))
}

// list answers the running and paused sandboxes (or the states asked
// for) whose metadata holds every pair of ?metadata=, oldest first,
// limit at a time with x-next-token.
func (d *Door) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := session.Filter{Metadata: map[string]string{}}
	if m := q.Get("metadata"); m != "" {
		pairs, err := url.ParseQuery(m)
		if err != nil {
			writeHTTPError(w, job.Wrap(job.CodeInvalidRequest, err, "metadata must be URL-encoded key=value pairs"))
			return
		}
		for k, vs := range pairs {
			key, err1 := url.QueryUnescape(k)
			val, err2 := url.QueryUnescape(vs[0])
			if err1 != nil || err2 != nil {
				writeHTTPError(w, job.Errorf(job.CodeInvalidRequest, "metadata must be URL-encoded key=value pairs"))
				return
			}
			f.Metadata[key] = val
		}
	}
	states := map[string]bool{"running": true, "paused": true}
	if s := q.Get("state"); s != "" {
		states = map[string]bool{}
		for _, st := range strings.Split(s, ",") {
			if st != "running" && st != "paused" {
				writeHTTPError(w, job.Errorf(job.CodeInvalidRequest, "state %q is not running or paused", st))
				return
			}
			states[st] = true
		}
	}
	var after time.Time
	if s := q.Get("startedAfter"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeHTTPError(w, job.Wrap(job.CodeInvalidRequest, err, "startedAfter must be an RFC 3339 time"))
			return
		}
		after = t
	}
	if t := q.Get("template"); t != "" && t != baseTemplate {
		writeJSON(w, http.StatusOK, []listedJSON{})
		return
	}
	recs, err := d.cfg.Sessions.List(f)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	out := []listedJSON{}
	for _, rec := range recs {
		l := listed(rec)
		if rec.State.Live() && states[l.State] && rec.CreatedAt.After(after) {
			out = append(out, l)
		}
	}
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	default:
		writeHTTPError(w, job.Errorf(job.CodeInvalidRequest, "order must be asc or desc"))
		return
	}
	page, next, err := paginate(out, q.Get("limit"), q.Get("nextToken"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
}

// paginate cuts limit sandboxes from the one nextToken names (the first
// when empty) and names the one after them.
func paginate(all []listedJSON, limit, nextToken string) ([]listedJSON, string, error) {
	start := 0
	if nextToken != "" {
		start = -1
		for i, s := range all {
			if s.SandboxID == nextToken {
				start = i
			}
		}
		if start < 0 {
			return nil, "", job.Errorf(job.CodeInvalidRequest, "nextToken %q names no listed sandbox", nextToken)
		}
	}
	all = all[start:]
	if limit == "" {
		return all, "", nil
	}
	n, err := strconv.Atoi(limit)
	if err != nil || n <= 0 {
		return nil, "", job.Errorf(job.CodeInvalidRequest, "limit must be a positive number")
	}
	if n >= len(all) {
		return all, "", nil
	}
	return all[:n], all[n].SandboxID, nil
}

func (d *Door) get(w http.ResponseWriter, r *http.Request) {
	rec, err := d.live(r.PathValue("id"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d.detail(rec))
}

func (d *Door) kill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := d.live(id); err != nil {
		writeHTTPError(w, err)
		return
	}
	if _, err := d.cfg.Sessions.Delete(r.Context(), id); err != nil {
		writeHTTPError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timeout sets the sandbox to expire timeout seconds from now.
func (d *Door) timeout(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Timeout int64 `json:"timeout"`
	}
	if err := decodeBody(r, &b); err != nil {
		writeHTTPError(w, err)
		return
	}
	d.setTimeout(w, r.PathValue("id"), b.Timeout)
}

// refresh keeps the sandbox alive duration seconds more from now
// (E2B's keep-alive: its default is 60 seconds).
func (d *Door) refresh(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Duration *int64 `json:"duration"`
	}
	if err := decodeBody(r, &b); err != nil {
		writeHTTPError(w, err)
		return
	}
	s := int64(60)
	if b.Duration != nil {
		s = *b.Duration
	}
	d.setTimeout(w, r.PathValue("id"), s)
}

func (d *Door) setTimeout(w http.ResponseWriter, id string, seconds int64) {
	if _, err := d.live(id); err != nil {
		writeHTTPError(w, err)
		return
	}
	if _, err := d.cfg.Sessions.SetTimeout(id, seconds); err != nil {
		writeHTTPError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pause freezes the sandbox; one already paused is 409, as E2B's.
func (d *Door) pause(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Memory *bool `json:"memory"`
	}
	if err := decodeBody(r, &b); err != nil {
		writeHTTPError(w, err)
		return
	}
	if b.Memory != nil && !*b.Memory {
		writeHTTPError(w, notSupported("pausing without memory (memory: false)"))
		return
	}
	id := r.PathValue("id")
	rec, err := d.live(id)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	if rec.State == session.StatePaused {
		writeHTTPError(w, job.Errorf(job.CodeJobConflict, "sandbox %s is already paused", id))
		return
	}
	if _, err := d.cfg.Sessions.Pause(r.Context(), id); err != nil {
		writeHTTPError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connect resumes a paused sandbox (201) or answers a running one (200),
// setting its timeout when the body names one (a sandbox paused at its
// timeout otherwise runs its timeout_s again). autoPause, the legacy
// resume's way to change what the timeout does, is not offered: it is
// set at create.
func (d *Door) connect(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Timeout   *int64 `json:"timeout"`
		Memory    *bool  `json:"memory"`
		AutoPause *bool  `json:"autoPause"`
	}
	if err := decodeBody(r, &b); err != nil {
		writeHTTPError(w, err)
		return
	}
	switch {
	case b.Memory != nil && !*b.Memory:
		writeHTTPError(w, notSupported("resuming by reboot (memory: false)"))
		return
	case b.AutoPause != nil && *b.AutoPause:
		writeHTTPError(w, notSupported("autoPause at resume (set lifecycle onTimeout 'pause' at create)"))
		return
	}
	id := r.PathValue("id")
	rec, err := d.live(id)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	status := http.StatusOK
	if rec.State == session.StatePaused {
		if rec, err = d.cfg.Sessions.Resume(r.Context(), id); err != nil {
			writeHTTPError(w, err)
			return
		}
		status = http.StatusCreated
	}
	if b.Timeout != nil {
		if rec, err = d.cfg.Sessions.SetTimeout(id, *b.Timeout); err != nil {
			writeHTTPError(w, err)
			return
		}
	}
	writeJSON(w, status, d.sandbox(rec))
}
