package e2bapi_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/session"
)

// clock is a settable clock for the session service.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// info is what a test reads of GET /sandboxes/{id}.
type info struct {
	State     string    `json:"state"`
	EndAt     time.Time `json:"endAt"`
	Lifecycle struct {
		OnTimeout  string `json:"onTimeout"`
		AutoResume bool   `json:"autoResume"`
	} `json:"lifecycle"`
}

// getInfo answers GET /sandboxes/{id}.
func getInfo(t *testing.T, url, id string) info {
	t.Helper()
	status, got := call(t, "GET", url+"/e2b/sandboxes/"+id, apiHeader(sessionsKey), nil)
	if status != 200 {
		t.Fatalf("GET /sandboxes/%s = %d %s", id, status, got)
	}
	var i info
	if err := json.Unmarshal([]byte(got), &i); err != nil {
		t.Fatal(err)
	}
	return i
}

// TestAutoPause: a sandbox created with autoPause (lifecycle onTimeout
// 'pause') is paused when its timeout runs out, not killed; getInfo
// says so; connect resumes it with the connect's timeout. With
// autoResume, an in-sandbox call resumes it, with its timeout again.
func TestAutoPause(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	srv, s := newServerWith(t, func(cfg *session.Config) { cfg.Now = c.now })
	sb := create(t, srv, `{"timeout":10,"autoPause":true}`)
	auto := create(t, srv, `{"timeout":10,"autoPause":true,"autoResume":{"enabled":true}}`)
	if got := getInfo(t, srv.URL, auto.SandboxID); got.Lifecycle.OnTimeout != "pause" || !got.Lifecycle.AutoResume {
		t.Errorf("lifecycle = %+v, want pause with autoResume", got.Lifecycle)
	}
	paused, expired := s.Reap(c.add(10 * time.Second))
	if len(paused) != 2 || len(expired) != 0 {
		t.Fatalf("Reap at the timeout = paused %v expired %v, want both paused", paused, expired)
	}
	for _, id := range []string{sb.SandboxID, auto.SandboxID} {
		if got := getInfo(t, srv.URL, id); got.State != "paused" {
			t.Errorf("%s at its timeout: state %q, want paused", id, got.State)
		}
	}

	c.add(time.Minute)
	status, got := call(t, "POST", srv.URL+"/e2b/v2/sandboxes/"+sb.SandboxID+"/connect", apiHeader(sessionsKey), strings.NewReader(`{"timeout":90}`))
	if status != 201 {
		t.Fatalf("connect = %d %s, want 201 (resumed)", status, got)
	}
	i := getInfo(t, srv.URL, sb.SandboxID)
	if want := c.now().Add(90 * time.Second); i.State != "running" || !i.EndAt.Equal(want) {
		t.Errorf("after connect: %s ending %v, want running ending %v", i.State, i.EndAt, want)
	}

	h := envdHeader(auto)
	h["Content-Type"] = "application/octet-stream"
	if status, got := call(t, "POST", srv.URL+"/e2b/files?path=woken.txt", h, strings.NewReader("x")); status != 200 {
		t.Fatalf("a file write to an auto-resuming sandbox = %d %s", status, got)
	}
	i = getInfo(t, srv.URL, auto.SandboxID)
	if want := c.now().Add(10 * time.Second); i.State != "running" || !i.EndAt.Equal(want) {
		t.Errorf("after the write: %s ending %v, want running ending %v", i.State, i.EndAt, want)
	}
	if _, expired := s.Reap(c.add(90 * time.Second)); !cmp.Equal(expired, []string(nil)) {
		t.Errorf("Reap = expired %v, want none (both pause again)", expired)
	}
}
