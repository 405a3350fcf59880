// Package client is a Go client for agent-runner's HTTP API: submit a
// RunJobRequest, read status and results, wait, follow live events over
// SSE (resuming with Last-Event-ID after a dropped connection), cancel,
// list and download artifacts; the same for agent tasks (tasks.go):
// submit a manifest, status, list with filters and cursor, cancel,
// destroy, logs over SSE, the WebSocket stream, artifacts; and kept
// sandboxes (sandboxes.go): create, list, exec, files, pause, resume,
// timeout, delete; their processes (processes.go): start, list, kill,
// signal, stdin, events from an offset; and a terminal over a process's
// WebSocket (terminal.go, Kubernetes exec framing). Errors carry
// the server's stable codes.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Client talks to one agent-runner server.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New returns a client for baseURL ("http://127.0.0.1:3000").
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{}}
}

// Accepted is the answer to a submit.
type Accepted struct {
	JobID  string     `json:"job_id"`
	Status job.Status `json:"status"`
}

// Status is a job's state; Result is set once it is terminal.
type Status struct {
	JobID   string
	Status  job.Status
	Attempt int
	Result  *job.Result
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, hdr http.Header) (*http.Response, error) {
	if body == nil {
		return c.Do(ctx, method, path, "", nil, hdr)
	}
	return c.Do(ctx, method, path, "application/json", bytes.NewReader(body), hdr)
}

// Do sends one request with the client's token and turns an error
// response into its *job.Error (other routes than jobs, such as the task
// API, go through it too).
func (c *Client) Do(ctx context.Context, method, path, contentType string, body io.Reader, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "bad request")
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot reach agent-runner").With("url", c.BaseURL)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var e struct{ Error *job.Error }
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) == nil && e.Error != nil {
			return nil, e.Error
		}
		return nil, job.Errorf(job.CodeInternal, "HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// Submit queues a request (raw RunJobRequest JSON).
func (c *Client) Submit(ctx context.Context, request []byte) (Accepted, error) {
	var a Accepted
	resp, err := c.do(ctx, http.MethodPost, "/v1/jobs", request, nil)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

// Get returns a job's status, with the result once terminal.
func (c *Client) Get(ctx context.Context, id string) (Status, error) { return c.get(ctx, id, "") }

func (c *Client) get(ctx context.Context, id, query string) (Status, error) {
	var raw json.RawMessage
	if err := c.getJSON(ctx, "/v1/jobs/"+url.PathEscape(id)+query, &raw); err != nil {
		return Status{}, err
	}
	var head struct {
		JobID   string     `json:"job_id"`
		Status  job.Status `json:"status"`
		Attempt int        `json:"attempt"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Status{}, err
	}
	st := Status{JobID: head.JobID, Status: head.Status, Attempt: head.Attempt}
	if head.Status.Terminal() {
		var res job.Result
		if err := json.Unmarshal(raw, &res); err != nil {
			return st, err
		}
		st.Result = &res
	}
	return st, nil
}

// Wait long-polls until the job is terminal and returns its result;
// every is the pause between polls when the server answers early.
func (c *Client) Wait(ctx context.Context, id string, every time.Duration) (job.Result, error) {
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	for {
		st, err := c.get(ctx, id, "?wait=20s")
		if err != nil {
			return job.Result{}, err
		}
		if st.Result != nil {
			return *st.Result, nil
		}
		select {
		case <-ctx.Done():
			return job.Result{}, ctx.Err()
		case <-time.After(every):
		}
	}
}

// Cancel cancels a job and returns its status afterwards.
func (c *Client) Cancel(ctx context.Context, id string) (Status, error) {
	resp, err := c.do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return Status{}, err
	}
	resp.Body.Close()
	return c.Get(ctx, id)
}

// Artifacts lists a terminal job's artifacts.
func (c *Client) Artifacts(ctx context.Context, id string) ([]job.Artifact, error) {
	var out struct{ Artifacts []job.Artifact }
	err := c.getJSON(ctx, "/v1/jobs/"+url.PathEscape(id)+"/artifacts", &out)
	return out.Artifacts, err
}

// Download writes one artifact to w and returns the recorded sha256.
func (c *Client) Download(ctx context.Context, id, path string, w io.Writer) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/artifacts/"+path, nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.Header.Get("X-Content-SHA256"), err
}

// Event is one live event.
type Event struct {
	ID      uint64     `json:"id"`
	Type    string     `json:"type"`
	JobID   string     `json:"job_id"`
	Status  job.Status `json:"status,omitempty"`
	Text    string     `json:"text,omitempty"`
	Base64  []byte     `json:"base64,omitempty"`
	Attempt int        `json:"attempt,omitempty"`
}

// Bytes returns an output event's exact bytes.
func (e Event) Bytes() []byte {
	if e.Base64 != nil {
		return e.Base64
	}
	return []byte(e.Text)
}

// Follow calls fn for each event until the job's terminal status event,
// reconnecting with Last-Event-ID when the stream drops.
func (c *Client) Follow(ctx context.Context, id string, fn func(Event) error) error {
	var last uint64
	for attempt := 0; ; attempt++ {
		done, err := c.followOnce(ctx, id, &last, fn)
		if done || ctx.Err() != nil {
			return err
		}
		if jerr, ok := err.(*job.Error); ok && jerr.Code.Class() != "run" {
			return err // not found, unauthorized: retrying will not help
		}
		if attempt > 20 {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *Client) followOnce(ctx context.Context, id string, last *uint64, fn func(Event) error) (bool, error) {
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if *last > 0 {
		hdr.Set("Last-Event-ID", strconv.FormatUint(*last, 10))
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, hdr)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return false, fmt.Errorf("bad event: %w", err)
		}
		if ev.ID > 0 {
			*last = ev.ID
		}
		if err := fn(ev); err != nil {
			return true, err
		}
		if ev.Type == "status" && ev.Status.Terminal() {
			return true, nil
		}
	}
	return false, job.Errorf(job.CodeRunIOFailed, "event stream ended early")
}
