package uitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestCrossOriginPageCannotDriveTheAPI: a page from another origin (the
// attack of a web page the operator opens while serve runs on loopback
// without tokens) posts a job as text/plain and a task as YAML, both as
// CORS "simple" requests and the YAML one also with its real type; serve
// refuses them all, so neither the job nor the task exists afterwards.
// The same bodies sent by a client (no Origin, a JSON or YAML type) are
// accepted, so the refusals came from the origin and type checks.
func TestCrossOriginPageCannotDriveTheAPI(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	ws, err := os.MkdirTemp(s.root, "ws-")
	if err != nil {
		t.Fatal(err)
	}
	jobBody := fmt.Sprintf(`{"workspace":{"path":%q},"command":{"argv":["true"]},"policy":{"allowed_commands":["true"]}}`, ws)
	repo := filepath.Join(s.root, "origin")
	if err := os.Rename(tasktest.Origin(t, map[string]string{"a.txt": "one\n"}), repo); err != nil {
		t.Fatal(err)
	}
	taskBody := fmt.Sprintf("version: \"1\"\nkind: Task\nmetadata: {id: csrf-task, name: csrf}\nrepository: {url: %q, branch: main}\nclaude: {prompt: \"x\"}\nagent: {command: [\"/bin/true\"]}\n", repo)
	jsJob, _ := json.Marshal(jobBody)
	jsTask, _ := json.Marshal(taskBody)
	jsAPI, _ := json.Marshal(s.url)
	page := `<!doctype html><title>elsewhere</title><script>
window.results = [];
(async () => {
  const api = ` + string(jsAPI) + `;
  const attempts = [
    ['text/plain job', api + '/v1/jobs', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: ` + string(jsJob) + `}],
    ['text/plain YAML task', api + '/api/v1/tasks', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: ` + string(jsTask) + `}],
    ['application/yaml task', api + '/api/v1/tasks', {method: 'POST', headers: {'Content-Type': 'application/yaml'}, body: ` + string(jsTask) + `}],
    ['read the jobs', api + '/v1/jobs', {}],
  ];
  for (const [name, url, opts] of attempts) {
    try {
      const r = await fetch(url, opts);
      window.results.push(name + ': ' + r.type + ' ' + r.status);
    } catch (e) {
      window.results.push(name + ': ' + e.name);
    }
  }
  window.done = true;
})();
</script>`
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(page))
	}))
	defer attacker.Close()
	var results []string
	run(t, ctx, "the other origin's page sends its requests", 30*time.Second,
		chromedp.Navigate(attacker.URL),
		waitJS(`window.done === true`),
		chromedp.Evaluate(`window.results`, &results))
	t.Logf("the page saw: %q", results)
	var jobs struct{ Jobs []any }
	var tasks struct{ Tasks []any }
	s.call(t, "GET", "/v1/jobs", "", nil, &jobs)
	s.call(t, "GET", "/api/v1/tasks", "", nil, &tasks)
	if got := [2]int{len(jobs.Jobs), len(tasks.Tasks)}; got != [2]int{0, 0} {
		t.Errorf("jobs, tasks after the cross-origin page: got %v, want [0 0]", got)
	}
	if code := s.call(t, "POST", "/v1/jobs", "application/json", []byte(jobBody), nil); code != http.StatusAccepted {
		t.Errorf("the job body from a client: got %d, want 202", code)
	}
	var answer map[string]any
	if code := s.call(t, "POST", "/api/v1/tasks", "application/yaml", []byte(taskBody), &answer); code != http.StatusAccepted {
		t.Errorf("the task body from a client: got %d %v, want 202", code, answer)
	}
}
