package uitest

import (
	"context"
	"net/url"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// requestLog records every request the page sends ("GET /v1/jobs?limit=25"),
// from the browser's network events, so a test can show what a page
// did not ask for.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

// logRequests starts recording the requests of ctx's page.
func logRequests(ctx context.Context) *requestLog {
	l := &requestLog{}
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*network.EventRequestWillBeSent)
		if !ok {
			return
		}
		u, err := url.Parse(e.Request.URL)
		if err != nil {
			return
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, e.Request.Method+" "+u.RequestURI())
		l.mu.Unlock()
	})
	return l
}

// mark is a position in the log, for since.
func (l *requestLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// since lists the requests after mark whose "METHOD /path?query" starts
// with prefix.
func (l *requestLog) since(mark int, prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs[mark:] {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}
