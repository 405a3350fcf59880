package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/client"
)

// build compiles agent-runner into dir and returns the binary's path. The
// package is named by import path so the bench builds from any directory
// of the module (go run from the root, go test from bench/load).
func build(dir string) (string, error) {
	bin := filepath.Join(dir, "agent-runner")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/agent-runner/agent-runner/cmd/agent-runner").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build agent-runner: %v\n%s", err, out)
	}
	return bin, nil
}

// backendArgs are the serve or worker flags that make kind the default
// backend, with the operator's consent where kind does not isolate.
func backendArgs(kind string) []string {
	args := []string{"--default-backend", kind}
	if kind == "local_process" {
		args = append(args, "--unsafe-local-process")
	}
	return args
}

// freeAddr is a loopback host:port nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is a started agent-runner process; exited closes when it ends.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func startProc(bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	return p, nil
}

// stop interrupts the process and waits for it (serve and worker shut
// down gracefully on SIGINT), killing it after 30 s.
func (p *proc) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *proc) memory() (memory, error) { return rss(p.cmd.Process.Pid) }

// server is a running `agent-runner serve` and a client of its API.
type server struct {
	*proc
	client *client.Client
	url    string
}

// startServe starts serve on a free loopback port with store (under b.dir,
// its --workspace-root) and waits until its API answers.
func (b *bench) startServe(store string, extra ...string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--addr", addr, "--store-dir", store, "--log-level", "error", "--workspace-root", b.dir}, extra...)
	p, err := startProc(b.bin, args...)
	if err != nil {
		return nil, err
	}
	s := &server{proc: p, client: b.client("http://" + addr), url: "http://" + addr}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("serve %s exited before answering", strings.Join(extra, " "))
		default:
		}
		if _, err := s.client.Get(context.Background(), "job_probe"); err != nil && strings.Contains(err.Error(), "not_found") {
			return s, nil
		}
	}
	p.cmd.Process.Kill()
	<-p.exited
	return nil, errors.New("serve did not answer within 30s")
}

// startWorker starts `agent-runner worker` on the queue at natsURL, with
// the token the API node generated for its loopback listener
// (<store>/nats/token; the queue refuses clients without one).
func (b *bench) startWorker(store, natsURL string, extra ...string) (*proc, error) {
	args := []string{"worker", "--nats", natsURL, "--store-dir", store, "--log-level", "error", "--workspace-root", b.dir}
	if token := filepath.Join(store, "nats", "token"); fileExists(token) {
		args = append(args, "--nats-token-file", token)
	}
	return startProc(b.bin, append(args, extra...)...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// client is an API client that keeps b.IdleConns idle connections to the
// server. net/http keeps 2, so at higher concurrency most requests open a
// new TCP connection; -idle-conns at the concurrency measures the server
// without that churn, the default keeps the figures comparable with
// earlier ones.
func (b *bench) client(url string) *client.Client {
	c := client.New(url, "")
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = b.IdleConns
	c.HTTP = &http.Client{Transport: t}
	return c
}

// memory is a process's resident set now and at its peak.
type memory struct{ RSS, Peak int64 }

func (m memory) String() string { return fmt.Sprintf("%d MB (peak %d MB)", m.RSS>>20, m.Peak>>20) }

// rss reads VmRSS and VmHWM of pid.
func rss(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.RSS = kb << 10
		case "VmHWM:":
			m.Peak = kb << 10
		}
	}
	return m, nil
}
