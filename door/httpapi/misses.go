package httpapi

import (
	"net/http"

	"github.com/agent-runner/agent-runner/job"
)

// jsonMisses answers a request no route matches in the API's error shape
// instead of the mux's plain text: 404 job.not_found naming the route, or
// 405 with the methods the path allows.
func jsonMisses(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.header.Get("Allow"))
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": job.Errorf(job.CodeInvalidRequest, "%s is not allowed on %s", r.Method, r.URL.Path).
				With("allow", probe.header.Get("Allow"))})
			return
		}
		if probe.status != http.StatusNotFound && probe.status != 0 {
			// A redirect (a path cleaned, a missing slash): as the mux says.
			mux.ServeHTTP(w, r)
			return
		}
		writeError(w, job.Errorf(job.CodeJobNotFound, "no route %s %s (GET /openapi.json lists them)", r.Method, r.URL.Path))
	})
}

// statusProbe records what the mux's own miss handler would answer.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }
