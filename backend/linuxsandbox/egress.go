package linuxsandbox

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// The egress bridge: with Spec.Egress the gateway's Unix socket and the
// run's CA bundle are bound into the sandbox under egressDir, and the init
// serves the workload's proxy on 127.0.0.1:backend.ProxyPort inside the
// sandbox's own network namespace, piping every accepted connection to
// the socket. The sandbox still has no interface but lo: the gateway on
// the host is its only way out, and it decides every connection.
const (
	egressDir    = "/.agent-runner"
	egressSocket = egressDir + "/egress.sock"
	egressCA     = egressDir + "/ca.pem"
)

// egressEnv replaces any proxy or CA variables in env with the bridge's.
func egressEnv(env []string, withCA bool) []string {
	ca := ""
	if withCA {
		ca = egressCA
	}
	add := backend.ProxyEnv(ca)
	keys := map[string]bool{}
	for _, kv := range add {
		keys[kv[:strings.IndexByte(kv, '=')]] = true
	}
	out := make([]string, 0, len(env)+len(add))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// bindEgress binds the gateway socket (and the CA bundle) into the root
// being built.
func bindEgress(root string, cfg initConfig) error {
	dir := filepath.Join(root, egressDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := bindFile(cfg.EgressSocket, filepath.Join(root, egressSocket)); err != nil {
		return err
	}
	if cfg.EgressCA != "" {
		return bindFile(cfg.EgressCA, filepath.Join(root, egressCA))
	}
	return nil
}

// bindFile binds one host file (a socket or a regular file) read-only.
// A read-only mount does not stop connect(2) on a socket.
func bindFile(src, target string) error {
	if err := touch(target); err != nil {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// forwardEgress listens on the proxy port inside the sandbox and pipes
// each connection to the gateway socket. It runs in the init for the
// life of the sandbox; the listener is made before the workload starts.
func forwardEgress() error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(backend.ProxyPort))
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go pipeToGateway(c)
		}
	}()
	return nil
}

func pipeToGateway(c net.Conn) {
	defer c.Close()
	g, err := net.Dial("unix", egressSocket)
	if err != nil {
		return
	}
	defer g.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(g, c)
		g.(*net.UnixConn).CloseWrite()
	})
	io.Copy(c, g)
	c.(*net.TCPConn).CloseWrite()
	wg.Wait()
}
