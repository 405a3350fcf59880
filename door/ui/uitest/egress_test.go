package uitest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// sandboxJob submits argv on linux_sandbox in a fresh workspace under
// s.root holding files, with extraPolicy appended to its policy, and
// returns the job id.
func (s *server) sandboxJob(t *testing.T, argv []string, extraPolicy string, files map[string]string) string {
	t.Helper()
	ws, err := os.MkdirTemp(s.root, "ws-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o755)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := json.Marshal(argv)
	body := fmt.Sprintf(`{"workspace":{"path":%q},"command":{"argv":%s},"policy":{"allowed_commands":[%q]%s},"limits":{"timeout_ms":60000},"backend":{"kind":"linux_sandbox"}}`,
		ws, a, filepath.Base(argv[0]), extraPolicy)
	var acc struct {
		JobID string `json:"job_id"`
	}
	if code := s.call(t, "POST", "/v1/jobs", "application/json", []byte(body), &acc); code != http.StatusAccepted {
		t.Fatalf("submit = %d", code)
	}
	return acc.JobID
}

// waitResult waits for job id to end and returns its status and error.
func (s *server) waitResult(t *testing.T, id string) (string, string) {
	t.Helper()
	var res struct {
		Status string
		Error  *struct{ Code, Message string }
	}
	s.call(t, "GET", "/v1/jobs/"+id+"?wait=25s", "", nil, &res)
	for deadline := time.Now().Add(60 * time.Second); res.Status == "queued" || res.Status == "running"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, res.Status)
		}
		s.call(t, "GET", "/v1/jobs/"+id, "", nil, &res)
	}
	if res.Error != nil {
		return res.Status, res.Error.Code + ": " + res.Error.Message
	}
	return res.Status, ""
}

// TestJobPageShowsEgressDecisions: a job with policy.network "allowlist"
// on linux_sandbox makes one HTTP request through the egress gateway to a
// host its allowlist names (a local server, pinned with --egress-resolve)
// and one to a host it does not. The job's page, open while it runs,
// shows both decisions from the job's event stream: the host, allowed or
// refused, and the refusal's reason. Opened again after the job ended,
// the page shows the same decisions from the run record (GET
// /v1/jobs/{id}/egress).
func TestJobPageShowsEgressDecisions(t *testing.T) {
	ctx := newBrowser(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s", r.Host)
	}))
	defer upstream.Close()
	port := upstream.Listener.Addr().(*net.TCPAddr).Port
	allowed := fmt.Sprintf("allowed.example.com:%d", port)
	s := startServe(t, "", "--egress-allow", allowed, "--egress-resolve", fmt.Sprintf("%s:127.0.0.1", allowed))
	os.Chmod(filepath.Dir(s.root), 0o755)
	if status, why := s.waitResult(t, s.sandboxJob(t, []string{"/bin/true"}, "", nil)); status != "completed" {
		t.Skipf("linux_sandbox is not usable here: %s %s", status, why)
	}

	// The page opens while the job sleeps; then the two requests.
	probe := fmt.Sprintf(`
import time, urllib.request, urllib.error
time.sleep(3)
def show(name, url):
    try:
        print(name, "OK", urllib.request.urlopen(url, timeout=10).read().decode())
    except urllib.error.HTTPError as e:
        print(name, "HTTP", e.code)
    except Exception as e:
        print(name, "FAIL", type(e).__name__, e)
show("allowed", "http://allowed.example.com:%[1]d/x")
show("refused", "http://refused.example.org:%[1]d/x")
time.sleep(1)
`, port)
	id := s.sandboxJob(t, []string{"/usr/bin/python3", "probe.py"}, fmt.Sprintf(`,"network":"allowlist","allowed_hosts":[%q]`, allowed), map[string]string{"probe.py": probe})
	allowedRow := `[...document.querySelectorAll("#egress-body tr")].find((tr) => tr.textContent.includes("allowed.example.com"))`
	refusedRow := `[...document.querySelectorAll("#egress-body tr")].find((tr) => tr.textContent.includes("refused.example.org"))`
	shown := []chromedp.Action{
		waitJS(fmt.Sprintf(`(() => { const tr = %s; return !!tr && !tr.classList.contains("denied") && tr.querySelector(".badge").textContent === "allowed" })()`, allowedRow)),
		waitJS(fmt.Sprintf(`(() => { const tr = %s; return !!tr && tr.classList.contains("denied") && tr.querySelector(".badge").textContent === "refused" && tr.textContent.includes("not_allowed") })()`, refusedRow)),
	}
	run(t, ctx, "the running job's page shows its egress decisions", 60*time.Second,
		append([]chromedp.Action{
			chromedp.Navigate(s.url + "/ui/#/jobs/" + id),
			waitJS(`document.querySelector(".head .badge").dataset.status === "running"`),
		}, shown...)...)
	shot(t, ctx, "egress-live")
	run(t, ctx, "the job completes", 60*time.Second,
		waitJS(`document.querySelector(".head .badge").dataset.status === "completed"`))
	if out := text(t, ctx, "#stdout"); !contains(out, "allowed OK upstream saw "+allowed, "refused HTTP 403") {
		t.Errorf("job output = %q, want the allowed request answered and the refused one 403", out)
	}

	requests := logRequests(ctx)
	// The live page reads the record once the job ended, maybe after the
	// log started: count only what the page opened afresh asks.
	run(t, ctx, "leave the live page", 10*time.Second, chromedp.Navigate("about:blank"))
	fresh := requests.mark()
	run(t, ctx, "the finished job's page shows its egress decisions from the record", 30*time.Second,
		append([]chromedp.Action{
			chromedp.Navigate(s.url + "/ui/#/jobs/" + id),
			waitJS(`document.querySelector(".head .badge").dataset.status === "completed"`),
		}, shown...)...)
	var rows int
	run(t, ctx, "count egress rows", 5*time.Second, chromedp.Evaluate(`document.querySelectorAll("#egress-body tr").length`, &rows))
	if rows != 2 {
		t.Errorf("%d egress rows, want 2 (one per connection)", rows)
	}
	if got := requests.since(fresh, "GET /v1/jobs/"+id+"/egress"); len(got) != 1 {
		t.Errorf("egress record reads = %q, want one", got)
	}
	shot(t, ctx, "egress-record")
}

// contains reports whether s holds every one of subs.
func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
