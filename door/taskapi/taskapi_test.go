package taskapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/taskstore"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

func setup(t *testing.T) (string, string) {
	url, origin, _ := setupWith(t, nil)
	return url, origin
}

// setupWith starts a task store and its API over a fresh origin repo;
// extra files are committed to the repo, and configure, when set, adjusts
// the store before the server starts.
func setupWith(t *testing.T, extra map[string]string, configure ...func(*taskstore.Store)) (string, string, *taskstore.Store) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n", "agent.sh": "echo working\necho two > a.txt\nif [ \"$1\" = slow ]; then sleep 30; fi\nif [ \"$1\" = beat ]; then sleep 1; fi\necho done >&2\nif [ \"$1\" = fail ]; then exit 3; fi\n"})
	base := filepath.Dir(origin)
	if len(extra) > 0 {
		// Extra files may name the origin as @ORIGIN@, known only now.
		for name, content := range extra {
			os.WriteFile(filepath.Join(origin, name), []byte(strings.ReplaceAll(content, "@ORIGIN@", origin)), 0o644)
		}
		tasktest.Git(t, origin, "add", ".")
		tasktest.Git(t, origin, "commit", "--quiet", "-m", "extra files")
	}
	b := tasktest.Backend(t)
	quick := stage.Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 1}
	s, err := taskstore.New(filepath.Join(base, "tasks"), lifecycle.Config{Backend: b, CloneBackoff: &quick, HeartbeatEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configure {
		c(s)
	}
	mux := http.NewServeMux()
	taskapi.Routes(mux, s, func(_ string, h http.Handler) http.Handler { return h })
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); s.Wait() })
	return srv.URL, origin, s
}

func manifest(id, origin, arg string) string {
	return `version: "1"
kind: Task
metadata: {id: ` + id + `, name: API task, labels: {team: infra}}
repository: {url: "` + origin + `", branch: main}
claude: {prompt: "edit a.txt"}
agent: {command: ["/bin/sh", "agent.sh", "` + arg + `"]}
vm: {memory: 512M, cpus: 1}
`
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(v)
	return resp.StatusCode
}

func waitState(t *testing.T, base, id string, want ...string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var st map[string]any
		getJSON(t, base+"/api/v1/tasks/"+id, &st)
		for _, w := range want {
			if st["state"] == w {
				return st
			}
		}
	}
	t.Fatalf("task %s never reached %v", id, want)
	return nil
}

func TestTaskAPI(t *testing.T) {
	base, origin := setup(t)
	resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest("api-1", origin, "fast")))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit = %v %v", resp.StatusCode, err)
	}
	// The SSE log stream follows the task to completion.
	sse, err := http.Get(base + "/api/v1/tasks/api-1/logs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(sse.Body)
	sse.Body.Close()
	for _, want := range []string{"event: stdout", `"line":"working"`, "event: stderr", "event: completed"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("log stream lacks %q:\n%s", want, body)
		}
	}
	st := waitState(t, base, "api-1", "completed")
	if st["name"] != "API task" || st["metadata"] == nil {
		t.Errorf("status = %v", st)
	}
	var arts struct {
		Artifacts []struct{ Name, SHA256 string }
	}
	if code := getJSON(t, base+"/api/v1/tasks/api-1/artifacts", &arts); code != 200 || len(arts.Artifacts) < 2 {
		t.Fatalf("artifacts = %d %+v", code, arts)
	}
	r, _ := http.Get(base + "/api/v1/tasks/api-1/artifacts/api-1.patch")
	patch, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !strings.Contains(string(patch), "+two") || r.Header.Get("X-Content-SHA256") == "" {
		t.Errorf("patch download = %d %q", r.StatusCode, patch)
	}
	if r, _ := http.Get(base + "/api/v1/tasks/api-1/artifacts/../state.json"); r.StatusCode != 404 {
		t.Errorf("path escape in download = %d", r.StatusCode)
	}

	// JSON {manifest_yaml}, cancel while running, filters.
	js, _ := json.Marshal(map[string]string{"manifest_yaml": manifest("api-2", origin, "slow")})
	resp, _ = http.Post(base+"/api/v1/tasks", "application/json", strings.NewReader(string(js)))
	if resp.StatusCode != 202 {
		t.Fatalf("json submit = %d", resp.StatusCode)
	}
	waitState(t, base, "api-2", "running")
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/tasks/api-2", nil)
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != 202 {
		t.Errorf("cancel = %d", resp.StatusCode)
	}
	waitState(t, base, "api-2", "cancelled")
	var list struct {
		Tasks      []map[string]any
		TotalCount int `json:"total_count"`
	}
	getJSON(t, base+"/api/v1/tasks?state=completed,cancelled&label=team=infra", &list)
	if list.TotalCount != 2 {
		t.Errorf("list = %+v", list)
	}
	getJSON(t, base+"/api/v1/tasks?state=cancelled", &list)
	if list.TotalCount != 1 || list.Tasks[0]["task_id"] != "api-2" {
		t.Errorf("state filter = %+v", list)
	}
	// Errors.
	if resp, _ := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader("kind: Task")); resp.StatusCode != 422 {
		t.Errorf("bad manifest = %d", resp.StatusCode)
	}
	if resp, _ := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest("api-1", origin, "fast"))); resp.StatusCode != 409 {
		t.Errorf("duplicate id = %d", resp.StatusCode)
	}
	if code := getJSON(t, base+"/api/v1/tasks/nope", &map[string]any{}); code != 404 {
		t.Errorf("unknown task = %d", code)
	}
}
