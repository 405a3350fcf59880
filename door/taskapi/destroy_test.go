package taskapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// postDestroy calls POST /api/v1/tasks/{id}/destroy and returns the status
// code and the decoded body.
func postDestroy(t *testing.T, base, id string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(base+"/api/v1/tasks/"+id+"/destroy", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// TestDestroyOverHTTP: an active task is refused (409 job.not_terminal)
// and keeps its workspace; a failed_preserved task loses its inbox, keeps
// its state, outbox and manifest, answers 200 with its status twice, and
// records workspace_destroyed once; an unknown task is 404.
func TestDestroyOverHTTP(t *testing.T) {
	base, origin, s := setupWith(t, nil)
	if resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest("busy", origin, "slow"))); err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit busy = %v", err)
	}
	waitState(t, base, "busy", "running")
	code, body := postDestroy(t, base, "busy")
	if e, _ := body["error"].(map[string]any); code != 409 || e["code"] != "job.not_terminal" {
		t.Errorf("destroy while running = %d %v", code, body)
	}
	if _, err := os.Stat(filepath.Join(s.Dir("busy"), "inbox", "a.txt")); err != nil {
		t.Errorf("refused destroy touched the workspace: %v", err)
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/tasks/busy", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 202 {
		t.Fatalf("cancel = %v", err)
	}
	waitState(t, base, "busy", "cancelled")

	preserve := manifest("kept", origin, "fail") + "lifecycle: {failure_action: preserve}\n"
	if resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(preserve)); err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit kept = %v", err)
	}
	waitState(t, base, "kept", "failed_preserved")
	dir := s.Dir("kept")
	if b, _ := os.ReadFile(filepath.Join(dir, "inbox", "a.txt")); string(b) != "two\n" {
		t.Fatalf("preserved workspace a.txt = %q", b)
	}
	for i := range 2 {
		code, body := postDestroy(t, base, "kept")
		if code != 200 || body["state"] != "failed_preserved" || body["task_id"] != "kept" {
			t.Errorf("destroy #%d = %d %v", i+1, code, body)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "inbox")); !os.IsNotExist(err) {
		t.Errorf("inbox survived destroy: %v", err)
	}
	for _, keep := range []string{"state.json", "manifest.yaml", "outbox/progress/stdout.log", "outbox/artifacts/metadata.json"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("destroy removed %s: %v", keep, err)
		}
	}
	events, _ := os.ReadFile(filepath.Join(dir, "outbox", "progress", "events.jsonl"))
	if n := strings.Count(string(events), `"type":"workspace_destroyed"`); n != 1 {
		t.Errorf("workspace_destroyed recorded %d times:\n%s", n, events)
	}
	if code, _ := postDestroy(t, base, "ghost"); code != 404 {
		t.Errorf("destroy unknown = %d", code)
	}
}

// TestDestroyNeedsCancelScope: the route is registered under the cancel
// scope, like DELETE.
func TestDestroyNeedsCancelScope(t *testing.T) {
	s, err := taskstore.New(t.TempDir(), lifecycle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	taskapi.Routes(mux, s, func(scope string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Scope", scope)
			h.ServeHTTP(w, r)
		})
	})
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/tasks/ghost/destroy", nil))
	if got := rec.Header().Get("X-Scope"); got != "cancel" || rec.Code != 404 {
		t.Errorf("POST destroy: scope %q, status %d", got, rec.Code)
	}
}
