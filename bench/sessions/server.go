package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/client"
)

// build compiles agent-runner into dir and returns the binary's path.
func build(dir string) (string, error) {
	bin := filepath.Join(dir, "agent-runner")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/agent-runner/agent-runner/cmd/agent-runner").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build agent-runner: %v\n%s", err, out)
	}
	return bin, nil
}

// server is a running `agent-runner serve` on loopback.
type server struct {
	cmd    *exec.Cmd
	exited chan struct{}
	url    string
	http   *http.Client
	jobs   *client.Client
}

// startServe starts serve over a fresh store under dir (its
// --workspace-root) with args, and waits until it answers: serve answers
// once its warm pools are full.
func startServe(bin, dir string, conns int, args ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	store, err := os.MkdirTemp(dir, "store-")
	if err != nil {
		return nil, err
	}
	argv := append([]string{"serve", "--addr", addr, "--store-dir", store, "--log-level", "error", "--workspace-root", dir, "--default-backend", "linux_sandbox"}, args...)
	cmd := exec.Command(bin, argv...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, exited: make(chan struct{}), url: "http://" + addr}
	go func() { cmd.Wait(); close(s.exited) }()
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = conns
	s.http = &http.Client{Transport: t}
	s.jobs = client.New(s.url, "")
	s.jobs.HTTP = s.http
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-s.exited:
			return nil, errors.New("serve exited before answering")
		default:
		}
		if resp, err := s.http.Get(s.url + "/health"); err == nil {
			resp.Body.Close()
			return s, nil
		}
	}
	s.stop()
	return nil, errors.New("serve did not answer within 5 minutes")
}

// stop interrupts serve and waits for it (it deletes its sandboxes).
func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.exited
	}
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
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, r)
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
