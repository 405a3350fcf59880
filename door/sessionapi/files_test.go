package sessionapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

type fileAnswer struct {
	Status       int
	Code         job.Code
	Body         string
	ContentRange string
}

// callRange is call with a Range header (none when empty); Body is the
// raw body of a 2xx answer that is not an error.
func callRange(t *testing.T, srv *httptest.Server, method, path, body, rng string) fileAnswer {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Error job.Error }
	json.Unmarshal(b, &e)
	a := fileAnswer{Status: resp.StatusCode, Code: e.Error.Code, ContentRange: resp.Header.Get("Content-Range")}
	if e.Error.Code == "" && resp.Header.Get("Content-Type") == "application/octet-stream" {
		a.Body = string(b)
	}
	return a
}

// TestFileRoutes: ranges, listings, stat, removal and moves through the
// door (files capped at 8 bytes), paused and running.
func TestFileRoutes(t *testing.T) {
	srv, _ := newServer(t)
	const base = "/v1/sandboxes/f1/files"
	for _, step := range []struct{ method, path, body string }{
		{"POST", "/v1/sandboxes", `{"id":"f1"}`},
		{"PUT", base + "?path=a.txt", "01234567"},
		{"PUT", base + "?path=d/b.txt&mode=600", "b"},
		{"POST", "/v1/sandboxes/f1/exec", `{"argv":["sh","-c","printf 0123456789abcdef > big; : > empty; ln -s /etc etc"]}`},
	} {
		if a := call(t, srv, step.method, step.path, step.body); a.Status/100 != 2 {
			t.Fatalf("%s %s = %+v", step.method, step.path, a)
		}
	}
	tests := []struct {
		name, method, path, body, rng string
		want                          fileAnswer
	}{
		{"whole", "GET", base + "?path=a.txt", "", "", fileAnswer{Status: 200, Body: "01234567"}},
		{"a-b", "GET", base + "?path=a.txt", "", "bytes=2-4", fileAnswer{Status: 206, Body: "234", ContentRange: "bytes 2-4/8"}},
		{"a-", "GET", base + "?path=a.txt", "", "bytes=5-", fileAnswer{Status: 206, Body: "567", ContentRange: "bytes 5-7/8"}},
		{"-n", "GET", base + "?path=a.txt", "", "bytes=-3", fileAnswer{Status: 206, Body: "567", ContentRange: "bytes 5-7/8"}},
		{"b past the end", "GET", base + "?path=a.txt", "", "bytes=6-100", fileAnswer{Status: 206, Body: "67", ContentRange: "bytes 6-7/8"}},
		{"past the end", "GET", base + "?path=a.txt", "", "bytes=8-", fileAnswer{Status: 416, Code: job.CodeRangeNotSatisfiable, ContentRange: "bytes */8"}},
		{"-0", "GET", base + "?path=a.txt", "", "bytes=-0", fileAnswer{Status: 416, Code: job.CodeRangeNotSatisfiable, ContentRange: "bytes */8"}},
		{"several ranges: whole", "GET", base + "?path=a.txt", "", "bytes=0-1,4-5", fileAnswer{Status: 200, Body: "01234567"}},
		{"another unit: whole", "GET", base + "?path=a.txt", "", "lines=1-2", fileAnswer{Status: 200, Body: "01234567"}},
		{"over the cap", "GET", base + "?path=big", "", "", fileAnswer{Status: 422, Code: job.CodeLimitExceeded}},
		{"a range of a file over the cap", "GET", base + "?path=big", "", "bytes=10-", fileAnswer{Status: 206, Body: "abcdef", ContentRange: "bytes 10-15/16"}},
		{"a range over the cap", "GET", base + "?path=big", "", "bytes=0-8", fileAnswer{Status: 422, Code: job.CodeLimitExceeded}},
		{"empty file", "GET", base + "?path=empty", "", "bytes=0-", fileAnswer{Status: 200}},
		{"a symlink", "GET", base + "?path=etc", "", "", fileAnswer{Status: 422, Code: job.CodePathEscape}},
		{"through a symlink", "GET", base + "?path=etc/passwd", "", "bytes=0-3", fileAnswer{Status: 422, Code: job.CodePathEscape}},
		{"missing", "GET", base + "?path=none", "", "", fileAnswer{Status: 404, Code: job.CodeJobNotFound}},
		{"stat escape", "GET", base + "/stat?path=../x", "", "", fileAnswer{Status: 422, Code: job.CodePathEscape}},
		{"stat missing", "GET", base + "/stat?path=none", "", "", fileAnswer{Status: 404, Code: job.CodeJobNotFound}},
		{"delete without recursive", "DELETE", base + "?path=d", "", "", fileAnswer{Status: 409, Code: job.CodeDirectoryNotEmpty}},
		{"delete bad recursive", "DELETE", base + "?path=d&recursive=maybe", "", "", fileAnswer{Status: 422, Code: job.CodeInvalidRequest}},
		{"delete the root", "DELETE", base + "?path=.", "", "", fileAnswer{Status: 422, Code: job.CodeInvalidRequest}},
		{"delete no path", "DELETE", base, "", "", fileAnswer{Status: 422, Code: job.CodeInvalidRequest}},
		{"delete escape", "DELETE", base + "?path=../../x", "", "", fileAnswer{Status: 422, Code: job.CodePathEscape}},
		{"move", "POST", base + "/move", `{"from":"a.txt","to":"e/f.txt"}`, "", fileAnswer{Status: 200}},
		{"moved", "GET", base + "?path=e/f.txt", "", "", fileAnswer{Status: 200, Body: "01234567"}},
		{"move onto a directory with entries", "POST", base + "/move", `{"from":"e/f.txt","to":"d"}`, "", fileAnswer{Status: 409, Code: job.CodeDirectoryNotEmpty}},
		{"move escape", "POST", base + "/move", `{"from":"e/f.txt","to":"etc/x"}`, "", fileAnswer{Status: 422, Code: job.CodePathEscape}},
		{"move unknown field", "POST", base + "/move", `{"from":"e/f.txt","to":"x","force":true}`, "", fileAnswer{Status: 422, Code: job.CodeInvalidRequest}},
		{"pause", "POST", "/v1/sandboxes/f1/pause", "", "", fileAnswer{Status: 200}},
		{"read paused", "GET", base + "?path=e/f.txt", "", "bytes=0-0", fileAnswer{Status: 206, Body: "0", ContentRange: "bytes 0-0/8"}},
		{"list paused", "GET", base + "?path=d", "", "", fileAnswer{Status: 200}},
		{"stat paused", "GET", base + "/stat?path=d/b.txt", "", "", fileAnswer{Status: 200}},
		{"delete paused", "DELETE", base + "?path=d&recursive=true", "", "", fileAnswer{Status: 409, Code: job.CodeSessionNotRunning}},
		{"move paused", "POST", base + "/move", `{"from":"d","to":"x"}`, "", fileAnswer{Status: 409, Code: job.CodeSessionNotRunning}},
		{"resume", "POST", "/v1/sandboxes/f1/resume", "", "", fileAnswer{Status: 200}},
		{"delete recursive", "DELETE", base + "?path=d&recursive=true", "", "", fileAnswer{Status: 204}},
		{"deleted", "GET", base + "/stat?path=d", "", "", fileAnswer{Status: 404, Code: job.CodeJobNotFound}},
		{"delete the link", "DELETE", base + "?path=etc", "", "", fileAnswer{Status: 204}},
	}
	for _, tt := range tests {
		if got := callRange(t, srv, tt.method, tt.path, tt.body, tt.rng); !cmp.Equal(got, tt.want) {
			t.Errorf("%s: %s %s (Range %q): (-want +got)\n%s", tt.name, tt.method, tt.path, tt.rng, cmp.Diff(tt.want, got))
		}
	}
}

// TestListingShape: a directory answers exactly the listing's fields,
// and stat a symlink's target; the dashboard reads these shapes.
func TestListingShape(t *testing.T) {
	srv, _ := newServer(t)
	call(t, srv, "POST", "/v1/sandboxes", `{"id":"l1"}`)
	call(t, srv, "PUT", "/v1/sandboxes/l1/files?path=src/a.txt&mode=0640", "12345678")
	call(t, srv, "POST", "/v1/sandboxes/l1/exec", `{"argv":["ln","-s","a.txt","src/z"]}`)
	get := func(path string) map[string]any {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d, %v", path, resp.StatusCode, err)
		}
		return v
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	list := get("/v1/sandboxes/l1/files?path=src")
	if diff := cmp.Diff([]string{"entries", "path", "truncated"}, keys(list)); diff != "" || list["path"] != "src" || list["truncated"] != false {
		t.Errorf("listing %v (-want +got keys)\n%s", list, diff)
	}
	entries, _ := list["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("entries = %v, want a.txt and z", entries)
	}
	a, _ := entries[0].(map[string]any)
	if diff := cmp.Diff([]string{"mode", "modified_at", "name", "path", "size", "type"}, keys(a)); diff != "" {
		t.Errorf("entry keys (-want +got)\n%s", diff)
	}
	want := map[string]any{"name": "a.txt", "path": "src/a.txt", "type": "file", "size": 8.0, "mode": "0640"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("entry %s = %v, want %v", k, a[k], v)
		}
	}
	if z, _ := entries[1].(map[string]any); z["type"] != "symlink" || z["symlink_target"] != nil {
		t.Errorf("listed symlink = %v, want type symlink without a target", z)
	}
	root := get("/v1/sandboxes/l1/files?path=")
	if root["path"] != "." {
		t.Errorf("root listing path = %v, want .", root["path"])
	}
	st := get("/v1/sandboxes/l1/files/stat?path=src/z")
	if st["type"] != "symlink" || st["symlink_target"] != "a.txt" || st["path"] != "src/z" {
		t.Errorf("stat of the symlink = %v", st)
	}
}
