package uitest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/door/ui"
)

// tokenServe starts serve with a token file: "admin-token" (admin, the
// test's own API calls) and "reader-token" (read only, the browser's).
func tokenServe(t *testing.T) *server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(auth.Hash("admin-token")+" admin admin\n"+auth.Hash("reader-token")+" read reader\n"), 0o600)
	return startServe(t, "admin-token", "--token-file", file)
}

// TestPagesArePublicDataIsNot: with a token file, every embedded page and
// script loads without a token, while the dashboard's data routes, the
// API and any other /ui/ path answer 401.
func TestPagesArePublicDataIsNot(t *testing.T) {
	s := tokenServe(t)
	get := func(path string) (int, string) {
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range ui.Assets() {
		if code, _ := get(p); code != 200 {
			t.Errorf("GET %s without a token = %d, want 200 (a public page asset)", p, code)
		}
	}
	for _, p := range []string{"/ui-api/jobs/x/request", "/ui-api/tasks/x/stream", "/ui/secret", "/ui/../v1/jobs", "/v1/jobs", "/api/v1/tasks", "/metrics"} {
		if code, body := get(p); code != 401 {
			t.Errorf("GET %s without a token = %d %s, want 401", p, code, body)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(s.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || got != "/ui/" {
		t.Errorf("GET / = %d Location %q, want 302 to /ui/", resp.StatusCode, got)
	}
}

// TestTokenLoginShowsDataOnlyAfterSignIn: with a token file the page shows
// no job before a token is entered, refuses an unknown one, shows the job
// after a read token, and hides cancel, which that token lacks.
func TestTokenLoginShowsDataOnlyAfterSignIn(t *testing.T) {
	ctx := newBrowser(t)
	s := tokenServe(t)
	id := s.submitJob(t, []string{"sh", "-c", "echo secret-output; sleep 60"}, "", nil)
	for deadline := time.Now().Add(20 * time.Second); s.jobStatus(t, id) != "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("job never ran")
		}
	}
	run(t, ctx, "the login dialog opens", 20*time.Second,
		chromedp.Navigate(s.url+"/ui/#/jobs"),
		waitJS(`document.querySelector("#login").open`))
	// Give the page time to show anything it (wrongly) could.
	time.Sleep(500 * time.Millisecond)
	if body := text(t, ctx, "body"); strings.Contains(body, id) || strings.Contains(body, "secret-output") {
		t.Fatalf("before sign-in the page shows job data: %q", body)
	}
	if rows := text(t, ctx, "#jobs-body"); rows != "" {
		t.Fatalf("before sign-in the jobs table holds %q", rows)
	}
	shot(t, ctx, "login")

	run(t, ctx, "an unknown token is refused", 20*time.Second,
		chromedp.SendKeys("#token", "wrong-token", chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		waitJS(`document.querySelector("#login-error").textContent.includes("does not know")`),
		waitJS(`document.querySelector("#login").open`))
	if rows := text(t, ctx, "#jobs-body"); rows != "" {
		t.Fatalf("after a wrong token the jobs table holds %q", rows)
	}

	run(t, ctx, "sign in with the read token", 20*time.Second,
		chromedp.Evaluate(`document.querySelector("#token").value = ""`, nil),
		chromedp.SendKeys("#token", "reader-token", chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		waitJS(`!document.querySelector("#login").open`),
		waitJS(fmt.Sprintf(`!!document.querySelector('tr[data-job=%q]')`, id)))
	shot(t, ctx, "signed-in")

	run(t, ctx, "the job page without cancel", 20*time.Second,
		hashTo("#/jobs/"+id),
		waitJS(`document.querySelector("#stdout").textContent.includes("secret-output")`),
		waitJS(`document.querySelector("#cancel").hidden`))
	shot(t, ctx, "job-read-only")
	if got := s.jobStatus(t, id); got != "running" {
		t.Errorf("job status = %q, want still running (nothing canceled it)", got)
	}
}
