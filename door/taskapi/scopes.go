package taskapi

import "net/http"

// readCheck turns the door's auth wrapper into a test of the read scope:
// the wrapped handler runs only for a token that may read.
func readCheck(wrap func(scope string, h http.Handler) http.Handler) func(*http.Request) bool {
	return func(r *http.Request) bool {
		ok := false
		wrap("read", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ok = true })).ServeHTTP(discardWriter{}, r)
		return ok
	}
}

// visible is what a cancel or destroy answers: the whole status to a
// token that may read, the id and state alone to one that may only
// cancel (no metadata, artifacts, progress or error text).
func (a *api) visible(r *http.Request, st TaskStatus) any {
	if a.canRead == nil || a.canRead(r) {
		return st
	}
	return map[string]any{"task_id": st.TaskID, "state": st.State}
}

// discardWriter swallows the refusal a scope test writes.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
