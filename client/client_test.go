package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// TestFollowResumesWithLastEventID: a stream that drops mid-job is
// reopened with Last-Event-ID and no event is seen twice.
func TestFollowResumesWithLastEventID(t *testing.T) {
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs/job_f/events" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		first := len(lastIDs) == 1
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if first {
			fmt.Fprint(w, ": keep-alive\n\n")
			fmt.Fprint(w, "id: 1\nevent: status\ndata: {\"id\":1,\"type\":\"status\",\"status\":\"running\"}\n\n")
			fmt.Fprint(w, "id: 2\nevent: stdout\ndata: {\"id\":2,\"type\":\"stdout\",\"text\":\"a\"}\n\n")
			return // the connection drops before the job ends
		}
		fmt.Fprint(w, "id: 3\nevent: stdout\ndata: {\"id\":3,\"type\":\"stdout\",\"base64\":\"/w==\"}\n\n")
		fmt.Fprint(w, "id: 4\nevent: status\ndata: {\"id\":4,\"type\":\"status\",\"status\":\"completed\"}\n\n")
		fmt.Fprint(w, "id: 5\nevent: stdout\ndata: {\"id\":5,\"type\":\"stdout\",\"text\":\"after the end\"}\n\n")
	}))
	defer srv.Close()
	c := client.New(srv.URL+"/", "tok")
	var got []string
	err := c.Follow(context.Background(), "job_f", func(ev client.Event) error {
		got = append(got, fmt.Sprintf("%d %s %s %q", ev.ID, ev.Type, ev.Status, ev.Bytes()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`1 status running ""`, `2 stdout  "a"`, `3 stdout  "\xff"`, `4 status completed ""`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "2"}, lastIDs); diff != "" {
		t.Errorf("Last-Event-ID per connection (-want +got):\n%s", diff)
	}
}

// TestErrorsCarryServerCodes: {"error": {...}} bodies become *job.Error.
func TestErrorsCarryServerCodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/jobs":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"queue.full","message":"job queue is full","details":{"capacity":1}}}`)
		case "/v1/jobs/job_x/events":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"job.not_found","message":"job not found"}}`)
		default:
			http.Error(w, "plain failure", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Submit(ctx, []byte(`{}`))
	var jerr *job.Error
	if !errors.As(err, &jerr) || jerr.Code != job.CodeQueueFull {
		t.Errorf("Submit to a full queue = %v, want %s", err, job.CodeQueueFull)
	}
	// Follow gives up at once on a code that retrying cannot fix.
	if err := c.Follow(ctx, "job_x", func(client.Event) error { return nil }); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("Follow(unknown) = %v, want %s", err, job.CodeJobNotFound)
	}
	if _, err := c.Get(ctx, "job_y"); job.CodeOf(err) != job.CodeInternal {
		t.Errorf("Get on a non-JSON 502 = %v, want %s", err, job.CodeInternal)
	}
	if _, err := client.New("http://127.0.0.1:1", "").Get(ctx, "job_z"); job.CodeOf(err) != job.CodeRunIOFailed {
		t.Errorf("Get with no server = %v, want %s", err, job.CodeRunIOFailed)
	}
}
