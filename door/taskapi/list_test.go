package taskapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/job"
)

// TestListValidation: GET /api/v1/tasks validates its query like GET
// /v1/jobs (422 validation.invalid_request, never a silent default), and
// an empty page is "tasks": [], not null.
func TestListValidation(t *testing.T) {
	base, _ := setup(t)
	tests := []struct {
		query    string
		wantCode int
		wantErr  job.Code
	}{
		{"", 200, ""},
		{"?state=running,completed&label=team=infra&limit=1000&offset=0", 200, ""},
		{"?state=failed_preserved&state=cancelled", 200, ""},
		{"?state=bogus", 422, job.CodeInvalidRequest},
		{"?state=running,canceled", 422, job.CodeInvalidRequest},
		{"?limit=0", 422, job.CodeInvalidRequest},
		{"?limit=1001", 422, job.CodeInvalidRequest},
		{"?limit=ten", 422, job.CodeInvalidRequest},
		{"?offset=-1", 422, job.CodeInvalidRequest},
		{"?label=team", 422, job.CodeInvalidRequest},
		{"?label==infra", 422, job.CodeInvalidRequest},
		{"?cursor=not-a-cursor", 422, job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		resp, err := http.Get(base + "/api/v1/tasks" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantCode {
			t.Errorf("GET /api/v1/tasks%s = %d, want %d: %s", tt.query, resp.StatusCode, tt.wantCode, body)
		}
		if got := errorCode(body); got != tt.wantErr {
			t.Errorf("GET /api/v1/tasks%s error code = %q, want %q", tt.query, got, tt.wantErr)
		}
		if tt.wantCode == 200 && !strings.Contains(string(body), `"tasks": []`) {
			t.Errorf("GET /api/v1/tasks%s on an empty store = %s, want \"tasks\": []", tt.query, body)
		}
	}
}

// TestListPaging pages newest first by cursor, keeps offset working and
// filters by several labels at once.
func TestListPaging(t *testing.T) {
	base, origin := setup(t)
	labels := map[string]string{"p-1": "a", "p-2": "b", "p-3": "a"}
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		doc := strings.Replace(manifest(id, origin, "fast"), "labels: {team: infra}", "labels: {team: infra, group: "+labels[id]+"}", 1)
		resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(doc))
		if err != nil || resp.StatusCode != 202 {
			t.Fatalf("submit %s = %v %v", id, resp, err)
		}
		waitState(t, base, id, "completed")
	}
	page := func(query string) ([]string, taskapi.TaskList) {
		t.Helper()
		var l taskapi.TaskList
		if code := getJSON(t, base+"/api/v1/tasks"+query, &l); code != 200 {
			t.Fatalf("GET /api/v1/tasks%s = %d", query, code)
		}
		var ids []string
		for _, st := range l.Tasks {
			ids = append(ids, st.TaskID)
		}
		return ids, l
	}
	var got []string
	ids, l := page("?limit=2")
	got = append(got, ids...)
	if l.NextCursor == "" || l.TotalCount != 3 || l.Limit != 2 {
		t.Fatalf("first page = %+v, want a next_cursor, total_count 3, limit 2", l)
	}
	ids, l = page("?limit=2&cursor=" + l.NextCursor)
	got = append(got, ids...)
	if l.NextCursor != "" {
		t.Errorf("last page next_cursor = %q, want none", l.NextCursor)
	}
	if diff := cmp.Diff([]string{"p-3", "p-2", "p-1"}, got); diff != "" {
		t.Errorf("pages by cursor (-want +got):\n%s", diff)
	}
	if ids, _ := page("?limit=1&offset=1"); !cmp.Equal(ids, []string{"p-2"}) {
		t.Errorf("limit=1&offset=1 = %v, want [p-2]", ids)
	}
	if ids, _ := page("?label=team=infra&label=group=a"); !cmp.Equal(ids, []string{"p-3", "p-1"}) {
		t.Errorf("two label filters = %v, want [p-3 p-1]", ids)
	}
	if ids, l := page("?label=group=c"); len(ids) != 0 || l.Tasks == nil {
		t.Errorf("no match = %v (nil %v), want an empty list", ids, l.Tasks == nil)
	}
}

// TestChildrenListEmpty: a parent without children lists "tasks": [].
func TestChildrenListEmpty(t *testing.T) {
	_, _, store := setupWith(t, nil)
	sum := sha256.Sum256([]byte("tok"))
	sock, stop, err := taskapi.ChildSocket(store)("lonely", hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequest(http.MethodGet, "http://children/v1/tasks", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"tasks": []`) {
		t.Errorf("children list of a parent without children = %d %s, want \"tasks\": []", resp.StatusCode, body)
	}
}

// errorCode is the code of an {"error": {...}} body, "" for any other.
func errorCode(body []byte) job.Code {
	var e struct{ Error *job.Error }
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return ""
	}
	return e.Error.Code
}
