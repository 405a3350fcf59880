package taskapi

import "net/http"

// destroy removes a terminal task's preserved workspace and answers with
// the task's status (the state does not change; events.jsonl records it).
func (a *api) destroy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := a.s.Destroy(id); err != nil {
		writeError(w, err)
		return
	}
	st, err := a.status(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.visible(r, st))
}
