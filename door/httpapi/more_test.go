package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/job"
)

func TestAuth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("# tokens\n"+
		auth.Hash("reader-token")+" read ci-reader\n"+
		auth.Hash("submit-token")+" submit,read ci-bot\n"), 0o600)
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, opts{tokens: tokens})
	body, _ := json.Marshal(e.request([]string{"true"}, "true"))
	do := func(method, path, token string) int {
		req, _ := http.NewRequest(method, e.url+path, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/health", "", 200},
		{"GET", "/openapi.json", "", 200},
		{"POST", "/v1/jobs", "", 401},
		{"POST", "/v1/jobs", "wrong-token", 401},
		{"POST", "/v1/jobs", "reader-token", 403},
		{"POST", "/v1/jobs", "submit-token", 202},
		{"GET", "/v1/jobs", "reader-token", 200},
		{"GET", "/metrics", "", 401},
		{"DELETE", "/v1/jobs/job_x", "submit-token", 403},
	}
	for _, tt := range tests {
		if got := do(tt.method, tt.path, tt.token); got != tt.want {
			t.Errorf("%s %s with %q = %d, want %d", tt.method, tt.path, tt.token, got, tt.want)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("plaintext-token read\n"), 0o600)
	if _, err := auth.Load(bad); err == nil {
		t.Error("a token file with a plaintext token loaded")
	}
}

func TestWebSocket(t *testing.T) {
	e := newEnv(t, opts{})
	id := e.submit(e.request([]string{"echo", "over websocket"}, "echo"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(e.url, "http", "ws", 1)+"/v1/jobs/"+id+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var out strings.Builder
	var last job.Status
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			break
		}
		var ev httpapi.StreamEvent
		json.Unmarshal(b, &ev)
		if ev.Type == "stdout" {
			out.WriteString(ev.Text)
		}
		if ev.Type == "status" {
			last = ev.Status
		}
	}
	if out.String() != "over websocket\n" || last != job.StatusCompleted {
		t.Errorf("websocket stream: stdout %q, last status %q", out.String(), last)
	}
}

// TestExternalNATS runs the same service against a separately started NATS
// server reached over TCP, as a multi-node deployment would.
func TestExternalNATS(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("external NATS did not start")
	}
	e := newEnv(t, opts{natsURL: ns.ClientURL()})
	res := e.wait(e.submit(e.request([]string{"echo", "via external nats"}, "echo")))
	if res.Status != job.StatusCompleted || res.Stdout.Text != "via external nats\n" {
		t.Errorf("result over external NATS = %s %q", res.Status, res.Stdout.Text)
	}
	if jsz, _ := ns.Jsz(nil); jsz == nil || jsz.Streams < 2 {
		t.Errorf("the external server does not hold the job and event streams")
	}
}
