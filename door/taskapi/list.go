package taskapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/state"
)

// Paging bounds of GET /api/v1/tasks, the same as GET /v1/jobs.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// TaskList is the body of GET /api/v1/tasks: one page, newest first.
// Tasks is [] when nothing matches, never null. NextCursor, when set,
// fetches the next page; TotalCount counts every task matching the
// filters (all pages); Limit and Offset echo the page asked for.
type TaskList struct {
	Tasks      []TaskStatus `json:"tasks"`
	NextCursor string       `json:"next_cursor,omitempty"`
	TotalCount int          `json:"total_count"`
	Limit      int          `json:"limit"`
	Offset     int          `json:"offset"`
}

// listQuery is a validated GET /api/v1/tasks query.
type listQuery struct {
	states []state.State
	labels map[string]string
	limit  int
	offset int
	after  *cursor
}

// parseListQuery validates the query like GET /v1/jobs does: an unknown
// state, a label without "=", a limit outside 1..1000, a negative offset
// or a cursor this server did not give are validation.invalid_request.
func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{limit: DefaultListLimit, labels: map[string]string{}}
	for _, v := range q["state"] {
		for _, s := range strings.Split(v, ",") {
			if s == "" {
				continue
			}
			if !slices.Contains(state.All, state.State(s)) {
				return lq, job.Errorf(job.CodeInvalidRequest, "unknown task state %q", s).With("field", "state")
			}
			lq.states = append(lq.states, state.State(s))
		}
	}
	for _, v := range q["label"] {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return lq, job.Errorf(job.CodeInvalidRequest, "label filter %q is not key=value", v).With("field", "label")
		}
		lq.labels[k] = val
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return lq, job.Errorf(job.CodeInvalidRequest, "limit must be between 1 and %d", MaxListLimit).With("field", "limit")
		}
		lq.limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return lq, job.Errorf(job.CodeInvalidRequest, "offset must be a non-negative integer").With("field", "offset")
		}
		lq.offset = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := decodeCursor(v)
		if err != nil {
			return lq, err
		}
		lq.after = &c
	}
	return lq, nil
}

func (lq listQuery) matches(st TaskStatus) bool {
	if len(lq.states) > 0 && !slices.Contains(lq.states, st.State) {
		return false
	}
	for k, v := range lq.labels {
		if got, ok := st.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// cursor is a position in the list order (created_at descending, then
// task_id ascending); clients see it as an opaque string.
type cursor struct {
	CreatedAt time.Time `json:"t"`
	TaskID    string    `json:"id"`
}

func (c cursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.TaskID == "" {
		return c, job.Errorf(job.CodeInvalidRequest, "cursor is not a next_cursor this server gave").With("field", "cursor")
	}
	return c, nil
}

// before reports whether st comes before c in the list order.
func before(st TaskStatus, c cursor) bool {
	if !st.CreatedAt.Equal(c.CreatedAt) {
		return st.CreatedAt.After(c.CreatedAt)
	}
	return st.TaskID <= c.TaskID
}

// list answers GET /api/v1/tasks: tasks filtered by state (comma list,
// repeatable) and label (key=value, repeatable, all must match), newest
// first, paged by cursor (and, for older clients, offset).
func (a *api) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	entries, err := os.ReadDir(a.s.Root)
	if err != nil {
		writeError(w, job.Wrap(job.CodeInternal, err, "cannot list tasks"))
		return
	}
	var all []TaskStatus
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		st, err := a.status(e.Name())
		if err != nil || !lq.matches(st) {
			continue
		}
		all = append(all, st)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].TaskID < all[j].TaskID
	})
	out := TaskList{Tasks: []TaskStatus{}, TotalCount: len(all), Limit: lq.limit, Offset: lq.offset}
	rest := all
	if lq.after != nil {
		i := 0
		for i < len(rest) && before(rest[i], *lq.after) {
			i++
		}
		rest = rest[i:]
	}
	rest = rest[min(lq.offset, len(rest)):]
	if len(rest) > lq.limit {
		last := rest[lq.limit-1]
		out.NextCursor = cursor{CreatedAt: last.CreatedAt, TaskID: last.TaskID}.String()
		rest = rest[:lq.limit]
	}
	out.Tasks = append(out.Tasks, rest...)
	writeJSON(w, http.StatusOK, out)
}
