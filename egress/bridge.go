package egress

import (
	"context"
	"net"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
)

// Bridge is one run's end of the gateway on the host: a Unix socket in a
// fresh directory, served by the gateway with the run's policy, and, when
// the run binds secrets, the CA bundle its workload must trust (the
// system roots plus the run's own CA). A backend makes Socket reachable
// from inside its sandbox and points the workload's proxy at it
// (backend.Spec.Egress); it decides nothing itself.
type Bridge struct {
	// Socket is the host path of the run's gateway socket.
	Socket string
	// CABundle is the host path of the PEM bundle, or "" without bindings.
	CABundle string

	dir    string
	cancel context.CancelFunc
	done   chan struct{}
}

// systemRoots are where distributions keep the PEM bundle of trusted
// roots that the workload keeps trusting beside the run's CA.
var systemRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/cert.pem",                  // others
}

// Open starts serving run on a new bridge. The directory (0700) and the
// socket (0600) belong to the runner's user: a backend whose sandbox runs
// as another host uid gives the socket to that uid alone (linux_sandbox as
// root, see GiveSocket), so no other local user can connect to the
// gateway and spend the run's allowlist or its secrets. Close ends it.
func (g *Gateway) Open(ctx context.Context, run *Run) (*Bridge, error) {
	dir, err := os.MkdirTemp("", "agent-runner-egress-")
	if err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the egress bridge directory")
	}
	b := &Bridge{Socket: filepath.Join(dir, "egress.sock"), dir: dir, done: make(chan struct{})}
	fail := func(err error, msg string) (*Bridge, error) {
		os.RemoveAll(dir)
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, msg)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fail(err, "cannot prepare the egress bridge directory")
	}
	var ca *CA
	if len(run.Bindings) > 0 {
		if ca, err = NewCA(); err != nil {
			return fail(err, "cannot create the run's CA")
		}
		b.CABundle = filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(b.CABundle, append(systemRootsPEM(), ca.CertPEM()...), 0o644); err != nil {
			return fail(err, "cannot write the run's CA bundle")
		}
	}
	ln, err := net.Listen("unix", b.Socket)
	if err != nil {
		return fail(err, "cannot listen on the egress bridge")
	}
	if err := os.Chmod(b.Socket, 0o600); err != nil {
		ln.Close()
		return fail(err, "cannot restrict the egress bridge socket")
	}
	ctx, b.cancel = context.WithCancel(ctx)
	go func() {
		defer close(b.done)
		if err := g.Serve(ctx, ln, run, ca); err != nil {
			g.log.Warn("egress bridge stopped", "run", run.ID, "error", err)
		}
	}()
	return b, nil
}

// Close stops serving, waits for every connection to end and removes the
// bridge's files.
func (b *Bridge) Close() error {
	b.cancel()
	<-b.done
	return os.RemoveAll(b.dir)
}

// systemRootsPEM is the first system bundle found, with a trailing
// newline, or nothing.
func systemRootsPEM() []byte {
	for _, p := range systemRoots {
		if pem, err := os.ReadFile(p); err == nil && len(pem) > 0 {
			if pem[len(pem)-1] != '\n' {
				pem = append(pem, '\n')
			}
			return pem
		}
	}
	return nil
}

// GiveSocket hands a bridge's socket to the host uid and gid a sandbox
// runs as (mode 0600, so that uid alone may connect); the runner, which
// listens on it, keeps serving.
func GiveSocket(socket string, uid, gid int) error {
	if err := os.Lchown(socket, uid, gid); err != nil {
		return job.Wrap(job.CodeBackendSetupFailed, err, "cannot give the egress bridge to the sandbox uid")
	}
	return nil
}
