package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// TestSubmitStaysInsideTheWorkspaceRoots: a submitter names /etc (with an
// include of shadow), a path under the root that links out, the run store
// under the root, or a path climbing with ".."; each is refused with
// validation.path_escape and leaves no record. The old server accepted
// them all and snapshotted what they named.
func TestSubmitStaysInsideTheWorkspaceRoots(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	ws := filepath.Join(root, "ws")
	os.MkdirAll(ws, 0o755)
	os.Symlink("/etc", filepath.Join(root, "etc-link"))
	r, err := runner.New(runner.Config{StoreDir: store, DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q, err := queue.Open(ctx, queue.Config{StoreDir: r.Store().Dir(), Capacity: 16, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	roots, err := workspaceroot.New([]string{root}, store)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Runner: r, Queue: q, WorkspaceRoots: roots}).Handler())
	defer srv.Close()
	os.MkdirAll(filepath.Join(store, "runs", "job_other", "snapshot"), 0o755)

	tests := []struct {
		name, path string
		status     int
		code       job.Code
	}{
		{"inside a root", ws, http.StatusAccepted, ""},
		{"etc", "/etc", http.StatusUnprocessableEntity, job.CodePathEscape},
		{"symlink out of a root", filepath.Join(root, "etc-link"), http.StatusUnprocessableEntity, job.CodePathEscape},
		{"the run store", filepath.Join(store, "runs", "job_other", "snapshot"), http.StatusUnprocessableEntity, job.CodePathEscape},
		{"dot-dot", ws + "/../ws", http.StatusUnprocessableEntity, job.CodePathEscape},
		{"missing outside", "/etc/no-such-dir", http.StatusUnprocessableEntity, job.CodePathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{
				"workspace": map[string]any{"path": tt.path, "include": []string{"shadow"}},
				"command":   map[string]any{"argv": []string{"cat", "shadow"}},
				"policy":    map[string]any{"allowed_commands": []string{"cat"}},
			})
			resp, err := http.Post(srv.URL+"/v1/jobs", "application/json", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				JobID string     `json:"job_id"`
				Error *job.Error `json:"error"`
			}
			json.NewDecoder(resp.Body).Decode(&out)
			var code job.Code
			if out.Error != nil {
				code = out.Error.Code
			}
			if resp.StatusCode != tt.status || code != tt.code {
				t.Errorf("POST /v1/jobs workspace.path %q = %d %q, want %d %q", tt.path, resp.StatusCode, code, tt.status, tt.code)
			}
		})
	}
	ids, _ := os.ReadDir(filepath.Join(store, "runs"))
	if len(ids) != 2 { // job_other and the one accepted job
		t.Errorf("run store holds %d records, want 2 (refusals leave none)", len(ids))
	}
}
