package linuxsandbox_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"

	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

func TestPorts(t *testing.T) {
	backendtest.Ports(t, backendtest.New(linuxsandbox.Kind, suiteConfig()))
}

// TestPortsNetworkModes: a sandbox whose network is an allowlist (its
// egress bridge listening on its loopback) is reached as a disabled
// one is; one on the host's network is refused, since its loopback is
// the host's.
func TestPortsNetworkModes(t *testing.T) {
	b := sandbox(t)
	t.Run("allowlist", func(t *testing.T) {
		dir := t.TempDir()
		os.Chmod(dir, 0o711)
		sock := filepath.Join(dir, "egress.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		sb := createWith(t, b, func(s *backend.Spec) {
			s.Network = job.NetworkAllowlist
			s.Egress = &backend.Egress{Socket: sock}
		})
		backendtest.EchoThroughPort(t, sb)
	})
	t.Run("host", func(t *testing.T) {
		sb := createWith(t, b, func(s *backend.Spec) { s.Network = job.NetworkHost })
		_, err := sb.(backend.PortDialer).DialPort(context.Background(), 22)
		if got := job.CodeOf(err); got != job.CodeBackendUnavail {
			t.Errorf("DialPort in a host-network sandbox = %v, want code %s", err, job.CodeBackendUnavail)
		}
	})
}

// createWith creates a kept sandbox of b from the suite's spec changed
// by edit; it is deleted when t ends.
func createWith(t *testing.T, b *linuxsandbox.Backend, edit func(*backend.Spec)) backend.Sandbox {
	t.Helper()
	spec, _, _ := backendtest.Spec(t)
	edit(&spec)
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { sb.Delete(context.Background()) })
	return sb
}
