// Package benchserve builds the agent-runner binary and runs its serve
// on loopback for the benchmarks that measure through the binary
// (bench/sessions, bench/e2b): the same build, start, health wait and
// stop for each.
package benchserve

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Build compiles agent-runner into dir and returns the binary's path.
// The package is named by import path, so a bench builds from any
// directory of the module.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "agent-runner")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/agent-runner/agent-runner/cmd/agent-runner").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build agent-runner: %v\n%s", err, out)
	}
	return bin, nil
}

// Serve is a running `agent-runner serve` on a loopback port.
type Serve struct {
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts bin's serve on a free loopback port over store, with dir
// as its --workspace-root, linux_sandbox as its default backend and
// args after, and waits until /health answers through hc (serve answers
// once its warm pools are full).
func Start(bin, store, dir string, hc *http.Client, args ...string) (*Serve, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	argv := append([]string{"serve", "--addr", addr, "--store-dir", store, "--log-level", "error",
		"--workspace-root", dir, "--default-backend", "linux_sandbox"}, args...)
	cmd := exec.Command(bin, argv...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Serve{URL: "http://" + addr, cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-s.exited:
			return nil, errors.New("serve exited before answering")
		default:
		}
		if resp, err := hc.Get(s.URL + "/health"); err == nil {
			resp.Body.Close()
			return s, nil
		}
	}
	s.Stop()
	return nil, errors.New("serve did not answer within 5 minutes")
}

// Stop interrupts serve and waits for it (it deletes its sandboxes),
// killing it after a minute.
func (s *Serve) Stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// Pid is serve's process id.
func (s *Serve) Pid() int { return s.cmd.Process.Pid }
