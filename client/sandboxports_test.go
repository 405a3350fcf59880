package client_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// TestSandboxPort: a request to SandboxPortPath through Do reaches the
// server listening on the sandbox's port (local_process: the host's
// loopback) with its path and query, and without the client's token; a
// port nothing listens on is session.port_unreachable.
func TestSandboxPort(t *testing.T) {
	c := sessionServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "sb-p"}); err != nil {
		t.Fatal(err)
	}
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" token="+r.Header.Get("Authorization"))
	}))
	defer inside.Close()
	_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(inside.URL, "http://"))
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.SandboxPortURL("sb-p", port, "/a?b=c"), c.BaseURL+"/v1/sandboxes/sb-p/ports/"+portStr+"/a?b=c"; got != want {
		t.Errorf("SandboxPortURL = %q, want %q", got, want)
	}
	resp, err := c.Do(ctx, http.MethodPost, client.SandboxPortPath("sb-p", port, "/api/x?q=1"), "text/plain", strings.NewReader("hi"), nil)
	if err != nil {
		t.Fatalf("Do(port path) = %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := string(b), "POST /api/x?q=1 token="; got != want {
		t.Errorf("the server in the sandbox answered %q, want %q", got, want)
	}
	inside.Close()
	_, err = c.Do(ctx, http.MethodGet, client.SandboxPortPath("sb-p", port, ""), "", nil, nil)
	assertCode(t, "Do(closed port)", err, job.CodeSessionPortUnreachable)
}
