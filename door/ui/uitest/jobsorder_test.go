package uitest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
)

// TestJobsListNewestFirst: the jobs list shows the newest job first, like
// the tasks list, and a job submitted while it is open arrives at the
// top; at 1400 px its table needs no sideways scrolling.
func TestJobsListNewestFirst(t *testing.T) {
	ctx := newBrowser(t)
	s := startServe(t, "")
	var ids []string
	for i := range 3 {
		id := s.submitJob(t, []string{"sh", "-c", fmt.Sprintf("echo job-%d", i)}, "", nil)
		ids = append([]string{id}, ids...)
		time.Sleep(20 * time.Millisecond) // ids are time-ordered by the millisecond
	}
	order := `[...document.querySelectorAll("#jobs-body tr")].map((tr) => tr.dataset.job)`
	run(t, ctx, "open the jobs list", 30*time.Second,
		chromedp.Navigate(s.url+"/ui/#/jobs"),
		waitJS(`document.querySelectorAll("#jobs-body tr").length === 3`))
	var got []string
	run(t, ctx, "read the order", 10*time.Second, chromedp.Evaluate(order, &got))
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("jobs list order (-want newest first +got):\n%s", diff)
	}
	id := s.submitJob(t, []string{"sh", "-c", "echo a-longer-command-line-for-the-table; sleep 0.2"}, "", nil)
	run(t, ctx, "a new job arrives at the top", 30*time.Second,
		waitJS(fmt.Sprintf(`document.querySelector("#jobs-body tr") && document.querySelector("#jobs-body tr").dataset.job === %q`, id)),
		waitJS(fmt.Sprintf(`!!document.querySelector('tr[data-job=%q] .badge[data-status="completed"]')`, id)))
	var width struct{ Window, Scroll, Client, Clipped int }
	run(t, ctx, "measure the table", 10*time.Second, chromedp.Evaluate(
		`({window: innerWidth, scroll: document.querySelector(".table-wrap").scrollWidth, client: document.querySelector(".table-wrap").clientWidth,
		  clipped: [...document.querySelectorAll("#jobs-body td:nth-child(6)")].filter((td) => td.scrollWidth > td.clientWidth).length})`, &width))
	if width.Scroll > width.Client {
		t.Errorf("at %d px the jobs table is %d px wide in a %d px frame: it scrolls sideways", width.Window, width.Scroll, width.Client)
	}
	if width.Clipped > 0 {
		t.Errorf("%d Updated times do not fit their column", width.Clipped)
	}
	shot(t, ctx, "jobs")
}
