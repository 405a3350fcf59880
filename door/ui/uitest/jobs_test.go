package uitest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// TestJobAppearsCompletesAndItsArtifactDownloads: a job submitted while
// the jobs page is open appears on it and turns completed; its page shows
// the output, and the artifact downloaded from the page has the SHA-256
// the result records; the overview counts it among the completed jobs.
func TestJobAppearsCompletesAndItsArtifactDownloads(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	run(t, ctx, "open the jobs page", 20*time.Second,
		chromedp.Navigate(s.url+"/"), // redirects to /ui/
		waitJS(`location.pathname === "/ui/"`),
		hashTo("#/jobs"),
		waitJS(`document.querySelector(".count") && document.querySelector(".count").textContent.includes("No jobs")`))

	id := s.submitJob(t, []string{"sh", "-c", "echo hello-from-the-job; printf 'artifact-bytes-%s' 42 > out.bin"}, `,"artifact_globs":["out.bin"]`, nil)
	row := fmt.Sprintf(`tr[data-job=%q]`, id)
	run(t, ctx, "the job appears and completes", 30*time.Second,
		waitJS(fmt.Sprintf(`!!document.querySelector(%q)`, row+` .badge[data-status="completed"]`)),
		waitJS(fmt.Sprintf(`document.querySelector(%q).textContent.includes("printf")`, row)))
	shot(t, ctx, "jobs-list")

	run(t, ctx, "open the job page", 20*time.Second,
		chromedp.Click(row+" a", chromedp.ByQuery),
		waitJS(`document.querySelector("#stdout") && document.querySelector("#stdout").textContent.includes("hello-from-the-job")`),
		waitJS(`!!document.querySelector("button[data-artifact='out.bin']")`))
	shot(t, ctx, "job-page")

	var res struct {
		Artifacts []struct{ Path, SHA256 string }
	}
	s.call(t, "GET", "/v1/jobs/"+id, "", nil, &res)
	if len(res.Artifacts) != 1 {
		t.Fatalf("result artifacts = %+v, want out.bin", res.Artifacts)
	}
	downloads := t.TempDir()
	run(t, ctx, "download the artifact", 20*time.Second,
		browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(downloads),
		chromedp.Click("button[data-artifact='out.bin']", chromedp.ByQuery),
		waitJS(`document.querySelector(".verify").textContent.includes("SHA-256 verified")`))
	var got []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(downloads, "out.bin")); err == nil && len(b) > 0 {
			got = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("out.bin was never downloaded")
		}
	}
	sum := sha256.Sum256(got)
	if got, want := hex.EncodeToString(sum[:]), res.Artifacts[0].SHA256; got != want {
		t.Errorf("downloaded out.bin SHA-256 = %s, want %s (the result's)", got, want)
	}
	if string(got) != "artifact-bytes-42" {
		t.Errorf("downloaded out.bin = %q, want %q", got, "artifact-bytes-42")
	}

	run(t, ctx, "the overview counts it", 20*time.Second,
		hashTo("#/"),
		waitJS(`document.querySelector("#health").textContent === "ok"`),
		waitJS(`/^[0-9]+$/.test(document.querySelector("#queue-depth").textContent) && document.querySelector("#queue-capacity").textContent === "1024"`),
		waitJS(`document.querySelector("main").textContent.includes("completed1")`))
	shot(t, ctx, "overview")
}

// TestCancelFromTheJobPage: the page's cancel button ends a running job.
func TestCancelFromTheJobPage(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	id := s.submitJob(t, []string{"sh", "-c", "echo started; sleep 120"}, "", nil)
	run(t, ctx, "the job page shows it running", 30*time.Second,
		chromedp.Navigate(s.url+"/ui/#/jobs/"+id),
		waitJS(`!!document.querySelector('.head .badge[data-status="running"]')`),
		waitJS(`document.querySelector("#stdout").textContent.includes("started")`),
		waitJS(`!document.querySelector("#cancel").disabled`))
	shot(t, ctx, "running")
	run(t, ctx, "cancel", 30*time.Second,
		chromedp.Click("#cancel", chromedp.ByQuery),
		waitJS(`!!document.querySelector('.head .badge[data-status="canceled"]')`))
	if got := s.jobStatus(t, id); got != "canceled" {
		t.Errorf("status after cancel from the page = %q, want canceled", got)
	}
	shot(t, ctx, "canceled")
}

// TestJobsListFollowsTheStreamWithoutPolling: once the jobs list has
// loaded, a job submitted afterwards appears on it, running and then
// completed, through the list-wide event stream alone: the page sends no
// list request (GET /v1/jobs?...) after its first, over longer than the
// 2 s the list was once re-read at.
func TestJobsListFollowsTheStreamWithoutPolling(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	requests := logRequests(ctx)
	run(t, ctx, "open the jobs page", 20*time.Second,
		chromedp.Navigate(s.url+"/ui/#/jobs"),
		waitJS(`document.querySelector(".count") && document.querySelector(".count").textContent.includes("No jobs")`))
	loaded, start := requests.mark(), time.Now()
	if got := requests.since(0, "GET /v1/events"); len(got) != 1 {
		t.Fatalf("requests to the event stream when the page loaded = %q, want one", got)
	}

	id := s.submitJob(t, []string{"sh", "-c", "sleep 2; echo late"}, "", nil)
	row := fmt.Sprintf(`tr[data-job=%q]`, id)
	run(t, ctx, "the job appears running, then completed", 30*time.Second,
		waitJS(fmt.Sprintf(`!!document.querySelector(%q)`, row+` .badge[data-status="running"]`)),
		waitJS(fmt.Sprintf(`document.querySelector(%q).textContent.includes("sleep 2")`, row)),
		waitJS(fmt.Sprintf(`!!document.querySelector(%q)`, row+` .badge[data-status="completed"]`)),
		waitJS(fmt.Sprintf(`document.querySelector(%q).textContent.includes("ms") || document.querySelector(%q).textContent.includes(" s")`, row+" td:nth-child(5)", row+" td:nth-child(5)")))
	if d := time.Since(start); d < 3*time.Second {
		time.Sleep(3*time.Second - d)
	}
	if got := requests.since(loaded, "GET /v1/jobs?"); len(got) > 0 {
		t.Errorf("list requests after the page loaded = %q, want none (the stream carries the changes)", got)
	}
	if got := requests.since(loaded, "GET /v1/events"); len(got) > 0 {
		t.Errorf("the event stream was opened again = %q, want it kept open", got)
	}
	shot(t, ctx, "live-list")
}
