package egress

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Past MaxNames distinct names a new name is refused without a lookup; a
// name already looked up, a pinned name, and refusals that need no
// answer (a port no rule allows) never count against it or reach the
// resolver.
func TestMaxNames(t *testing.T) {
	port := plainUpstream(t, okHandler("ok"))
	f := startFlood(t, Config{MaxNames: 3, Resolve: map[string]string{"pinned.allowed.test": "127.0.0.1"}},
		[]string{"*.allowed.test", fmt.Sprintf("pinned.allowed.test:%d", port)})

	type answer struct {
		Status  int
		Rule    string
		Lookups int64
	}
	for _, tc := range []struct {
		target string
		want   answer
	}{
		{"a.allowed.test:443", answer{http.StatusBadGateway, ReasonResolveFailed, 1}},
		{"b.allowed.test:443", answer{http.StatusBadGateway, ReasonResolveFailed, 2}},
		{"c.allowed.test:80", answer{http.StatusBadGateway, ReasonResolveFailed, 3}},
		{"a.allowed.test:80", answer{http.StatusBadGateway, ReasonResolveFailed, 4}}, // looked up again: not new
		{"d.allowed.test:443", answer{http.StatusForbidden, ReasonTooManyNames, 4}},  // the 4th name: no lookup
		{"e.f.allowed.test:443", answer{http.StatusForbidden, ReasonTooManyNames, 4}},
		{"g.allowed.test:22", answer{http.StatusForbidden, ReasonNotAllowed, 4}}, // port not allowed: no lookup
		{"evil.test:443", answer{http.StatusForbidden, ReasonNotAllowed, 4}},
		{fmt.Sprintf("pinned.allowed.test:%d", port), answer{http.StatusOK, fmt.Sprintf("pinned.allowed.test:%d", port), 4}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			before := len(f.snapshot())
			status, err := f.connect(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			// The record comes when the connection ends, after the answer.
			var rule string
			for range 500 {
				if rs := f.snapshot(); len(rs) > before {
					rule = rs[len(rs)-1].Rule
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			got := answer{status, rule, f.lookups.Load()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CONNECT %s (-want +got):\n%s", tc.target, diff)
			}
		})
	}
}
