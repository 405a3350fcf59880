package taskapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(fds)
}

// TestChildSocketFloodIsBounded: a task opens 2000 idle connections on
// its children socket. The server keeps at most ChildSocketConns of them
// (the rest are closed as they arrive), so its descriptors stay bounded;
// the main API keeps answering; a legitimate request is answered or
// refused at once, and answered once the flood is gone. The old server
// accepted every connection and held it: 2000 descriptors per task.
func TestChildSocketFloodIsBounded(t *testing.T) {
	s, err := taskstore.New(t.TempDir(), lifecycle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("tok"))
	sock, stop, err := taskapi.ChildSocket(s)("parent", hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer health.Close()
	children := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	list := func() (int, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://task/v1/tasks", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := children.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := list(); code != http.StatusOK {
		t.Fatalf("children socket before the flood = %d, %v", code, err)
	}

	before := openFDs(t)
	const flood = 2000
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	// Descriptors the server holds: what this process has open beyond the
	// client ends of the flood.
	server := func() int { return openFDs(t) - before - len(conns) }
	limit := taskapi.ChildSocketConns + 8
	// Well inside the header timeout: the cap, not a timeout, must do it.
	deadline := time.Now().Add(2 * time.Second)
	for server() > limit && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := server(); got > limit {
		t.Fatalf("the server holds %d descriptors for %d idle connections, want at most %d", got, flood, limit)
	}
	resp, err := http.Get(health.URL)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("main API during the flood = %v, %v", resp, err)
	}
	resp.Body.Close()
	start := time.Now()
	code, err := list()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a legitimate request during the flood took %s (%d, %v): it must be answered or refused at once", took, code, err)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	deadline = time.Now().Add(10 * time.Second)
	for code, err = list(); code != http.StatusOK && time.Now().Before(deadline); code, err = list() {
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Errorf("children socket after the flood = %d, %v", code, err)
	}
}
