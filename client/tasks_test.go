package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/taskstore"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// taskServer is the task API as serve mounts it, over a real task store
// running agents on local_process, behind a bearer token ("tok").
func taskServer(t *testing.T) (*client.Client, string) {
	t.Helper()
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n",
		"agent.sh": "echo working\necho two > a.txt\nif [ \"$1\" = slow ]; then sleep 30; fi\necho done >&2\n"})
	s, err := taskstore.New(filepath.Join(filepath.Dir(origin), "tasks"), lifecycle.Config{Backend: localprocess.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	taskapi.Routes(mux, s, func(_ string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, `{"error":{"code":"auth.unauthorized","message":"no token"}}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); s.Wait() })
	return client.New(srv.URL, "tok"), origin
}

func taskManifest(id, origin, arg string) []byte {
	return []byte(`version: "1"
kind: Task
metadata: {id: ` + id + `, name: client task, labels: {team: infra}}
repository: {url: "` + origin + `", branch: main}
claude: {prompt: "edit a.txt"}
agent: {command: ["/bin/sh", "agent.sh", "` + arg + `"]}
`)
}

// TestTaskClient: submit, follow over the WebSocket and SSE, status,
// list with filters and cursor, artifacts, cancel, destroy and errors,
// against the real task API.
func TestTaskClient(t *testing.T) {
	c, origin := taskServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acc, err := c.SubmitTask(ctx, taskManifest("c-1", origin, "fast"))
	if err != nil || acc.TaskID != "c-1" || !acc.Accepted {
		t.Fatalf("SubmitTask = %+v, %v", acc, err)
	}
	var output []string
	var states []client.TaskState
	err = c.FollowTask(ctx, "c-1", func(m client.TaskMessage) error {
		switch m.Type {
		case "output":
			output = append(output, m.Stream+" "+m.Text)
		case "state_change":
			states = append(states, m.To)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("FollowTask: %v", err)
	}
	if diff := cmp.Diff([]string{"stdout working", "stderr done"}, output); diff != "" {
		t.Errorf("FollowTask output (-want +got):\n%s", diff)
	}
	if len(states) == 0 || states[len(states)-1] != "completed" {
		t.Errorf("FollowTask states = %v, want to end completed", states)
	}
	var lines []string
	final, err := c.TaskLogs(ctx, "c-1", func(stream, line string) error {
		lines = append(lines, stream+" "+line)
		return nil
	})
	if err != nil || final.State != "completed" {
		t.Fatalf("TaskLogs final = %+v, %v", final, err)
	}
	if diff := cmp.Diff([]string{"stdout working", "stderr done"}, lines); diff != "" {
		t.Errorf("TaskLogs lines (-want +got):\n%s", diff)
	}
	task, err := c.GetTask(ctx, "c-1")
	if err != nil || task.Name != "client task" || task.Labels["team"] != "infra" || task.Metadata == nil || *task.Metadata.ExitCode != 0 {
		t.Fatalf("GetTask = %+v, %v", task, err)
	}
	arts, err := c.TaskArtifacts(ctx, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	var patch *client.TaskArtifact
	for i := range arts {
		if arts[i].Name == "c-1.patch" {
			patch = &arts[i]
		}
	}
	if patch == nil {
		t.Fatalf("TaskArtifacts = %+v, want c-1.patch", arts)
	}
	var buf bytes.Buffer
	digest, err := c.DownloadTaskArtifact(ctx, "c-1", patch.Name, &buf)
	sum := sha256.Sum256(buf.Bytes())
	if err != nil || digest != patch.SHA256 || hex.EncodeToString(sum[:]) != digest || !strings.Contains(buf.String(), "+two") {
		t.Errorf("DownloadTaskArtifact = %q (sha %s), %v; want the patch with sha %s", buf.String(), digest, err, patch.SHA256)
	}

	// Cancel a running task, then destroy its workspace.
	if _, err := c.SubmitTask(ctx, taskManifest("c-2", origin, "slow")); err != nil {
		t.Fatal(err)
	}
	for st, _ := c.GetTask(ctx, "c-2"); st.State != "running"; st, _ = c.GetTask(ctx, "c-2") {
		if ctx.Err() != nil {
			t.Fatalf("c-2 never ran: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.CancelTask(ctx, "c-2"); err != nil {
		t.Fatal(err)
	}
	if st, err := c.WaitTask(ctx, "c-2", 20*time.Millisecond); err != nil || st.State != "cancelled" {
		t.Errorf("WaitTask after cancel = %s, %v; want cancelled", st.State, err)
	}
	if st, err := c.DestroyTask(ctx, "c-2"); err != nil || st.TaskID != "c-2" {
		t.Errorf("DestroyTask = %+v, %v", st, err)
	}

	// List with filters, one task a page.
	var ids []string
	f := client.TaskFilter{States: []client.TaskState{"completed", "cancelled"}, Labels: map[string]string{"team": "infra"}, Limit: 1}
	for page := 0; page < 5; page++ {
		l, err := c.ListTasks(ctx, f)
		if err != nil || l.TotalCount != 2 {
			t.Fatalf("ListTasks(%+v) = %+v, %v", f, l, err)
		}
		for _, st := range l.Tasks {
			ids = append(ids, st.TaskID)
		}
		if f.Cursor = l.NextCursor; f.Cursor == "" {
			break
		}
	}
	if diff := cmp.Diff([]string{"c-2", "c-1"}, ids); diff != "" {
		t.Errorf("ListTasks pages (-want +got):\n%s", diff)
	}
	if l, err := c.ListTasks(ctx, client.TaskFilter{States: []client.TaskState{"failed"}}); err != nil || l.Tasks == nil || len(l.Tasks) != 0 {
		t.Errorf("ListTasks(failed) = %+v, %v; want an empty page", l, err)
	}

	// Errors carry the server's codes.
	tests := []struct {
		name string
		err  error
		want job.Code
	}{
		{"GetTask(unknown)", func() error { _, err := c.GetTask(ctx, "nope"); return err }(), job.CodeJobNotFound},
		{"FollowTask(unknown)", c.FollowTask(ctx, "nope", func(client.TaskMessage) error { return nil }), job.CodeJobNotFound},
		{"SubmitTask(same id)", func() error { _, err := c.SubmitTask(ctx, taskManifest("c-1", origin, "fast")); return err }(), job.CodeJobConflict},
		{"ListTasks(limit 5000)", func() error { _, err := c.ListTasks(ctx, client.TaskFilter{Limit: 5000}); return err }(), job.CodeInvalidRequest},
		{"ListTasks(unknown state)", func() error {
			_, err := c.ListTasks(ctx, client.TaskFilter{States: []client.TaskState{"done"}})
			return err
		}(), job.CodeInvalidRequest},
		{"no token", func() error { _, err := client.New(c.BaseURL, "").GetTask(ctx, "c-1"); return err }(), job.CodeUnauthorized},
	}
	for _, tt := range tests {
		if got := job.CodeOf(tt.err); got != tt.want {
			t.Errorf("%s = %v, want %s", tt.name, tt.err, tt.want)
		}
	}
}
