// Package taskapi is the HTTP door to agent tasks (seed 004): submit a
// manifest, list, inspect and cancel tasks, follow their logs over
// Server-Sent Events or a WebSocket, and list or download their artifacts.
package taskapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// Routes registers the task API on mux; wrap(scope, h) adds auth.
func Routes(mux *http.ServeMux, s *taskstore.Store, wrap func(scope string, h http.Handler) http.Handler, opts ...Option) {
	a := &api{s: s, canRead: readCheck(wrap)}
	for _, o := range opts {
		o(a)
	}
	for _, r := range a.routes() {
		mux.Handle(r.pattern, wrap(r.scope, r.h))
	}
}

type route struct {
	pattern, scope string
	h              http.HandlerFunc
}

func (a *api) routes() []route {
	return []route{
		{"POST /api/v1/tasks", "submit", a.submit},
		{"GET /api/v1/tasks", "read", a.list},
		{"GET /api/v1/tasks/{id}", "read", a.get},
		{"DELETE /api/v1/tasks/{id}", "cancel", a.cancel},
		{"POST /api/v1/tasks/{id}/destroy", "cancel", a.destroy},
		{"GET /api/v1/tasks/{id}/logs", "read", a.logs},
		{"GET /api/v1/tasks/{id}/artifacts", "read", a.artifacts},
		{"GET /api/v1/tasks/{id}/artifacts/{name...}", "read", a.download},
		{"GET /ws/tasks/{id}/stream", "read", a.stream},
	}
}

// Patterns lists the routes Routes registers ("METHOD /path").
func Patterns() []string {
	var out []string
	for _, r := range (&api{}).routes() {
		out = append(out, r.pattern)
	}
	return out
}

type api struct {
	s *taskstore.Store
	// canRead says whether a request's token may also read (nil: every
	// caller may, as on the children socket, which is the task's own).
	canRead func(*http.Request) bool
	// events wakes the task streams (nil: they poll; see news).
	events Events
}

// writeJSON and writeError answer like serve's job API (one mapping of
// job codes to statuses).
func writeJSON(w http.ResponseWriter, status int, v any) { httpreply.JSON(w, status, v) }

func writeError(w http.ResponseWriter, err error) { httpreply.Error(w, err) }

// submit accepts a YAML body, or JSON: the manifest itself, or
// {"manifest_yaml": "..."} or {"manifest": {...}}.
func (a *api) submit(w http.ResponseWriter, r *http.Request) {
	doc, err := readManifest(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := a.s.Submit(doc)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"task_id": id, "accepted": true})
}

// readManifest returns the manifest document of a submit request.
func readManifest(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return nil, job.Errorf(job.CodeBodyTooLarge, "manifest larger than 1 MiB")
	}
	if !strings.Contains(r.Header.Get("Content-Type"), "json") {
		return body, nil
	}
	var wrapped struct {
		ManifestYAML string          `json:"manifest_yaml"`
		Manifest     json.RawMessage `json:"manifest"`
		Kind         string          `json:"kind"`
	}
	if err := json.Unmarshal(body, &wrapped); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, job.Errorf(job.CodeInvalidRequest, "body is not JSON: %s at byte %d", syn.Error(), syn.Offset)
		}
		return nil, job.Errorf(job.CodeInvalidRequest, "body is not a JSON object (a manifest, or {\"manifest\": {...}} or {\"manifest_yaml\": \"...\"})")
	}
	switch {
	case wrapped.ManifestYAML != "":
		return []byte(wrapped.ManifestYAML), nil
	case len(wrapped.Manifest) > 0:
		return wrapped.Manifest, nil // JSON is YAML
	case wrapped.Kind != "":
		return body, nil // the manifest itself
	default:
		return nil, job.Errorf(job.CodeInvalidRequest, "JSON body is neither a task manifest (kind: Task) nor {\"manifest\": {...}} or {\"manifest_yaml\": \"...\"}")
	}
}

// TaskStatus is a task's status with progress once known.
type TaskStatus struct {
	state.Record
	Name     string              `json:"name,omitempty"`
	Labels   map[string]string   `json:"labels,omitempty"`
	Metadata *lifecycle.Metadata `json:"metadata,omitempty"`
	// Heartbeat is the latest progress, CPU and memory report of the
	// agent (outbox/progress/metrics.jsonl), once one was written.
	Heartbeat *agentstep.Heartbeat `json:"heartbeat,omitempty"`
}

func (a *api) status(id string) (TaskStatus, error) {
	m, err := a.s.Open(id)
	if err != nil {
		return TaskStatus{}, err
	}
	st := TaskStatus{Record: m.Current()}
	if b, err := os.ReadFile(filepath.Join(a.s.Dir(id), "manifest.yaml")); err == nil {
		if t, err := manifest.Parse(b); err == nil {
			st.Name, st.Labels = t.Metadata.Name, t.Metadata.Labels
		}
	}
	st.Heartbeat, _ = agentstep.LastHeartbeat(filepath.Join(a.s.Dir(id), "outbox", "progress"))
	if md, ok := lifecycle.ReadMetadata(a.s.Dir(id)); ok {
		if md.Artifacts == nil {
			md.Artifacts = []stage.Artifact{} // [] like every list the API answers, never null
		}
		st.Metadata = &md
	}
	return st, nil
}

// record is a task's checkpoint alone: what the log and stream loops
// read on every poll (status also parses the manifest and metadata).
func (a *api) record(id string) (state.Record, error) {
	m, err := a.s.Open(id)
	if err != nil {
		return state.Record{}, err
	}
	return m.Current(), nil
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	st, err := a.status(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.status(id); err != nil {
		writeError(w, err)
		return
	}
	if err := a.s.Cancel(id); err != nil {
		writeError(w, err)
		return
	}
	st, _ := a.status(id)
	writeJSON(w, http.StatusAccepted, a.visible(r, st))
}

func (a *api) artifacts(w http.ResponseWriter, r *http.Request) {
	st, err := a.status(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	if st.Metadata == nil {
		writeError(w, job.Errorf(job.CodeNotTerminal, "task has not finished"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_id": st.TaskID, "artifacts": st.Metadata.Artifacts})
}

// download serves an artifact named in metadata.json, never a raw path.
func (a *api) download(w http.ResponseWriter, r *http.Request) {
	st, err := a.status(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	name := r.PathValue("name")
	if st.Metadata != nil && name == metadataFile {
		// The record the runner wrote (seed 004 lists it among a task's
		// artifacts): exit code, timing, stats and the artifact list.
		a.serveMetadata(w, st.TaskID)
		return
	}
	if st.Metadata != nil {
		for _, art := range st.Metadata.Artifacts {
			if art.Name != name {
				continue
			}
			root, err := os.OpenRoot(filepath.Join(a.s.Dir(st.TaskID), "outbox", "artifacts"))
			if err != nil {
				break
			}
			defer root.Close()
			f, err := root.Open(filepath.FromSlash(name))
			if err != nil {
				break
			}
			defer f.Close()
			w.Header().Set("X-Content-SHA256", art.SHA256)
			w.Header().Set("Content-Type", "application/octet-stream")
			io.Copy(w, f)
			return
		}
	}
	writeError(w, job.Errorf(job.CodeJobNotFound, "no such artifact").With("name", name))
}
