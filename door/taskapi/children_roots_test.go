package taskapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskstore"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// TestSocketChildrenMeetTheOperatorsRules: over the children socket, a
// child naming its parent's repository is still refused when that
// repository lies outside serve's workspace roots (the parent was recorded
// before them), as is a file:// URL into the store or a child wanting more
// concurrent children than its parent. The old socket accepted the first.
func TestSocketChildrenMeetTheOperatorsRules(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	outside := t.TempDir()
	s, err := taskstore.New(filepath.Join(store, "tasks"), lifecycle.Config{Roots: &workspaceroot.Roots{Dirs: []string{root}, Excluded: []string{store}}})
	if err != nil {
		t.Fatal(err)
	}
	doc := func(id, url, extra string) string {
		return "version: \"1\"\nkind: Task\nmetadata: {id: " + id + ", name: c}\nrepository: {url: \"" + url + "\", branch: main}\nclaude: {prompt: p}\n" + extra
	}
	record := func(id, url string) {
		if _, err := state.Create(s.Dir(id), id, ""); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(s.Dir(id), "manifest.yaml"), []byte(doc(id, url, "children: {max_concurrent: 2}\n")), 0o644)
	}
	record("p-outside", outside)
	record("p-store", "file://"+s.Dir("p-outside"))
	sum := sha256.Sum256([]byte("tok"))
	post := func(parent, body string) (int, job.Code) {
		t.Helper()
		sock, stop, err := taskapi.ChildSocket(s)(parent, hex.EncodeToString(sum[:]))
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		req, _ := http.NewRequest(http.MethodPost, "http://task/v1/tasks", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Error *job.Error `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		if out.Error == nil {
			return resp.StatusCode, ""
		}
		return resp.StatusCode, out.Error.Code
	}
	tests := []struct {
		name, parent, body string
		status             int
		code               job.Code
	}{
		{"parent's repository outside the roots", "p-outside", doc("c1", outside, ""), http.StatusUnprocessableEntity, job.CodePathEscape},
		{"file URL into the store", "p-store", doc("c2", "file://"+s.Dir("p-outside"), ""), http.StatusUnprocessableEntity, job.CodePathEscape},
		{"more concurrent children than the parent", "p-outside", doc("c3", outside, "children: {max_concurrent: 50}\n"), http.StatusForbidden, job.CodeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, code := post(tt.parent, tt.body); status != tt.status || code != tt.code {
				t.Errorf("POST /v1/tasks on %s's socket = %d %q, want %d %q", tt.parent, status, code, tt.status, tt.code)
			}
		})
	}
	s.Wait()
}
