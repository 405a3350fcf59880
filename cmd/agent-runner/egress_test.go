package main

import (
	"bufio"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestEgressAllowlistThroughTheCLI runs sandboxed jobs with network
// allowlist through `agent-runner run`, as a user would: a local HTTP and
// a local HTTPS server stand in for remote hosts (pinned with
// --egress-resolve), the workload uses the proxy variables it is given,
// and every decision lands in the run record.
func TestEgressAllowlistThroughTheCLI(t *testing.T) {
	sandboxUsable(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed (scripts/test installs it)")
	}
	// The plain upstream also serves a git repository over smart HTTP.
	origin := tasktest.Origin(t, map[string]string{"remote.txt": "from the remote repository\n"})
	bare := filepath.Join(filepath.Dir(origin), "repo.git")
	for _, args := range [][]string{{"clone", "--quiet", "--bare", origin, bare}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	gitServer := &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend", Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1"}}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/repo.git/") {
			gitServer.ServeHTTP(w, r)
			return
		}
		fmt.Fprintf(w, "plain upstream saw %s", r.Host)
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls upstream saw %s", r.Host)
	}))
	defer secure.Close()
	plainPort := plain.Listener.Addr().(*net.TCPAddr).Port
	tlsPort := secure.Listener.Addr().(*net.TCPAddr).Port

	store := sandboxTempDir(t)
	ws := sandboxTempDir(t)
	// The workload trusts the TLS stand-in's certificate (issued for
	// example.com) through curl's --cacert; the name it dials is
	// api.example.com, pinned to the stand-in.
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw})
	os.WriteFile(filepath.Join(ws, "upstream.pem"), certPEM, 0o644)
	script := fmt.Sprintf(`
import os, subprocess, urllib.request, urllib.error, socket
def show(name, fn):
    try:
        print(name, "OK", fn())
    except urllib.error.HTTPError as e:
        print(name, "HTTP", e.code, e.read().decode()[:160])
    except Exception as e:
        print(name, "FAIL", type(e).__name__)
show("plain", lambda: urllib.request.urlopen("http://plain.example.com:%[1]d/x", timeout=10).read().decode())
show("other", lambda: urllib.request.urlopen("http://other.example.org:%[1]d/x", timeout=10).read().decode())
show("direct", lambda: socket.create_connection(("127.0.0.1", %[1]d), timeout=2))
show("dns", lambda: socket.getaddrinfo("example.com", 443))
import ssl
def fronted():
    # CONNECT to an allowed name, then a ClientHello for another one.
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT api.example.com:%[2]d HTTP/1.1\r\nHost: api.example.com:%[2]d\r\n\r\n")
    head = s.recv(1024).decode()
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    ctx.wrap_socket(s, server_hostname="evil.example.net").do_handshake()
    return head.split("\r\n")[0] + " and a handshake"
show("fronting", fronted)
r = subprocess.run(["%[3]s", "-sS", "-k", "https://api.example.com:%[2]d/y"], capture_output=True, text=True)
print("tunnel", r.returncode, r.stdout)
r = subprocess.run(["git", "clone", "--quiet", "http://plain.example.com:%[1]d/repo.git", "/tmp/clone"], capture_output=True, text=True)
print("git", r.returncode, r.stderr.strip(), open("/tmp/clone/remote.txt").read().strip() if r.returncode == 0 else "")
`, plainPort, tlsPort, curl)
	os.WriteFile(filepath.Join(ws, "probe.py"), []byte(script), 0o644)
	body := func(hosts string) string {
		return `{"workspace":{"path":"` + ws + `"},"command":{"argv":["/usr/bin/python3","probe.py"]},` +
			`"policy":{"allowed_commands":["python3","curl"],"network":"allowlist","allowed_hosts":` + hosts + `},` +
			`"limits":{"timeout_ms":60000},"backend":{"kind":"linux_sandbox"}}`
	}
	flags := []string{"run", "--store-dir", store,
		"--egress-allow", fmt.Sprintf("*.example.com:%d", plainPort), "--egress-allow", fmt.Sprintf("api.example.com:%d", tlsPort),
		"--egress-resolve", fmt.Sprintf("plain.example.com:%d:127.0.0.1", plainPort),
		"--egress-resolve", fmt.Sprintf("api.example.com:%d:127.0.0.1", tlsPort)}
	hosts := fmt.Sprintf(`["plain.example.com:%d","api.example.com:%d","other.example.org:%d"]`, plainPort, tlsPort, plainPort)
	out, stderr, code := cli(t, "", append(flags, "--request", requestFile(t, body(hosts)))...)
	var res job.Result
	json.Unmarshal([]byte(out), &res)
	if code != 0 || res.Status != job.StatusPolicyDenied || res.Error == nil || res.Error.Code != job.CodeNetworkDenied ||
		!strings.Contains(res.Error.Message, "other.example.org") {
		t.Fatalf("a host beyond the ceiling = %d %s %+v %s, want policy_denied network_denied naming it", code, res.Status, res.Error, stderr)
	}

	hosts = fmt.Sprintf(`["plain.example.com:%d","api.example.com:%d"]`, plainPort, tlsPort)
	out, stderr, code = cli(t, "", append(flags, "--request", requestFile(t, body(hosts)))...)
	res = job.Result{}
	json.Unmarshal([]byte(out), &res)
	if code != 0 || res.Status != job.StatusCompleted {
		t.Fatalf("allowlist job = %d %s %+v\n%s", code, res.Status, res.Error, stderr)
	}
	got := res.Stdout.Text
	for _, want := range []string{
		fmt.Sprintf("plain OK plain upstream saw plain.example.com:%d", plainPort),
		"other HTTP 403 agent-runner egress: other.example.org",
		"direct FAIL", "dns FAIL",
		"fronting FAIL",
		fmt.Sprintf("tunnel 0 tls upstream saw api.example.com:%d", tlsPort),
		"git 0  from the remote repository",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("workload output lacks %q:\n%s%s", want, got, res.Stderr.Text)
		}
	}
	// The run record holds one decision per connection.
	f, err := os.Open(filepath.Join(store, "runs", res.JobID, "egress.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var d egress.Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("egress.jsonl: %v: %s", err, sc.Text())
		}
		if d.Run != res.JobID {
			t.Errorf("decision of run %q in job %s", d.Run, res.JobID)
		}
		seen[fmt.Sprintf("%s %s %v %s", d.Host, d.Mode, d.Allowed, d.Rule)]++
	}
	for _, want := range []string{
		fmt.Sprintf("plain.example.com http true plain.example.com:%d", plainPort),
		"other.example.org http false not_allowed",
		fmt.Sprintf("api.example.com tunnel true api.example.com:%d", tlsPort),
		"api.example.com tunnel false sni_mismatch",
	} {
		if seen[want] == 0 {
			t.Errorf("egress.jsonl lacks %q: %v", want, seen)
		}
	}
}
