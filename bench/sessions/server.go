package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/bench/internal/benchserve"
	"github.com/agent-runner/agent-runner/client"
)

// server is a running `agent-runner serve` on loopback, with a client
// keeping conns connections to it.
type server struct {
	*benchserve.Serve
	http *http.Client
	jobs *client.Client
}

// startServe starts serve over a fresh store under dir (its
// --workspace-root) with args, and waits until it answers: serve answers
// once its warm pools are full.
func startServe(bin, dir string, conns int, args ...string) (*server, error) {
	store, err := os.MkdirTemp(dir, "store-")
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = conns
	hc := &http.Client{Transport: t}
	serve, err := benchserve.Start(bin, store, dir, hc, args...)
	if err != nil {
		return nil, err
	}
	jobs := client.New(serve.URL, "")
	jobs.HTTP = hc
	return &server{Serve: serve, http: hc, jobs: jobs}, nil
}

// call sends a JSON request and decodes a JSON answer into out; a status
// other than want is an error with the body.
func (s *server) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// sandbox is what the bench reads of a sandbox record.
type sandbox struct {
	ID          string `json:"id"`
	Start       string `json:"start"`
	StartReason string `json:"start_reason"`
}

// create creates a sandbox from req and checks how it started.
func (s *server) create(ctx context.Context, req map[string]any, start string) (sandbox, error) {
	var sb sandbox
	if err := s.call(ctx, http.MethodPost, "/v1/sandboxes", req, http.StatusCreated, &sb); err != nil {
		return sb, err
	}
	if sb.Start != start {
		return sb, fmt.Errorf("sandbox %s started %s (%s), want %s", sb.ID, sb.Start, sb.StartReason, start)
	}
	return sb, nil
}

// exec runs argv in sandbox id and checks it completed.
func (s *server) exec(ctx context.Context, id string, argv ...string) error {
	var res struct {
		Status string `json:"status"`
	}
	if err := s.call(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/exec", map[string]any{"argv": argv}, http.StatusOK, &res); err != nil {
		return err
	}
	if res.Status != "completed" {
		return fmt.Errorf("exec in %s: %s", id, res.Status)
	}
	return nil
}

// remove deletes sandbox id.
func (s *server) remove(ctx context.Context, id string) error {
	return s.call(ctx, http.MethodDelete, "/v1/sandboxes/"+id, nil, http.StatusOK, nil)
}

// runJob submits a linux_sandbox job running argv in ws and waits for
// it to complete.
func (s *server) runJob(ctx context.Context, ws string, argv ...string) error {
	body, _ := json.Marshal(map[string]any{
		"workspace": map[string]any{"path": ws},
		"command":   map[string]any{"argv": argv},
		// The shell allowed, as a sandbox's default session policy: no
		// shell denial is built for either.
		"policy":  map[string]any{"allowed_commands": []string{argv[0]}, "allow_shell": true},
		"backend": map[string]any{"kind": "linux_sandbox"},
	})
	acc, err := s.jobs.Submit(ctx, body)
	if err != nil {
		return err
	}
	res, err := s.jobs.Wait(ctx, acc.JobID, 2*time.Millisecond)
	if err != nil {
		return err
	}
	if res.Status != "completed" {
		return fmt.Errorf("job %s: %s (%v)", acc.JobID, res.Status, res.Error)
	}
	return nil
}
