package taskapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/job"
)

// streamAll reads a task's WebSocket stream until the server closes it.
func streamAll(t *testing.T, base, id string) ([]taskapi.StreamMessage, websocket.StatusCode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/tasks/"+id+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var msgs []taskapi.StreamMessage
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return msgs, websocket.CloseStatus(err)
		}
		var m taskapi.StreamMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("message %q: %v", b, err)
		}
		if m.TaskID != id {
			t.Errorf("message for %q on %s's stream", m.TaskID, id)
		}
		msgs = append(msgs, m)
	}
}

func TestWebSocketStream(t *testing.T) {
	base, origin := setup(t)
	for _, tc := range []struct{ id, arg, final string }{{"ws-ok", "beat", "completed"}, {"ws-fail", "fail", "failed"}} {
		t.Run(tc.arg, func(t *testing.T) {
			resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest(tc.id, origin, tc.arg)))
			if err != nil || resp.StatusCode != 202 {
				t.Fatalf("submit = %v %v", resp, err)
			}
			msgs, status := streamAll(t, base, tc.id)
			if status != websocket.StatusNormalClosure {
				t.Errorf("closed with %v", status)
			}
			var states []string
			kinds := map[string]int{}
			var output []string
			for _, m := range msgs {
				kinds[m.Type]++
				switch m.Type {
				case "state_change":
					states = append(states, string(m.To))
				case "output":
					output = append(output, m.Stream+":"+m.Text)
				}
			}
			want := "pending staging provisioning ready running completing " + tc.final
			if got := strings.Join(states, " "); got != want {
				t.Errorf("state changes %q, want %q", got, want)
			}
			if !strings.Contains(strings.Join(output, "\n"), "stdout:working") || !strings.Contains(strings.Join(output, "\n"), "stderr:done") {
				t.Errorf("output = %q", output)
			}
			if kinds["progress"] == 0 {
				t.Errorf("no progress message: %v", kinds)
			}
			if tc.final == "failed" {
				last := msgs[len(msgs)-1]
				if last.Type != "error" || last.Error == nil || last.Error.Code != "run.exit_nonzero" {
					t.Errorf("last message = %+v", last)
				}
			} else if kinds["error"] != 0 {
				t.Errorf("error message on a completed task: %+v", msgs)
			}
			if tc.arg == "beat" && sandboxCgroups() && kinds["metrics"] == 0 {
				t.Errorf("no metrics message from a 1 s agent with 100 ms heartbeats: %v", kinds)
			}
		})
	}
	// A late subscriber gets the whole history of a finished task.
	msgs, _ := streamAll(t, base, "ws-ok")
	if len(msgs) == 0 || msgs[0].Type != "state_change" || msgs[0].To != "pending" {
		t.Errorf("replay starts with %+v", msgs)
	}
	// Unknown tasks are refused before the upgrade.
	_, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(base, "http")+"/ws/tasks/nope/stream", nil)
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("unknown task: %v %v", resp, err)
	}
}

// sandboxCgroups reports whether tasks here run on linux_sandbox with
// cgroup limits (and so heartbeats carry CPU and memory).
func sandboxCgroups() bool {
	b, err := linuxsandbox.New(backend.Config{})
	return err == nil && b.Available(context.Background()) == nil && slices.Contains(b.Capabilities().Enforces, job.LimitMemory)
}
