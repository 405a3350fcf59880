package egress

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const secretValue = "sk-real-secret-7f3a9c"

// seen is what an upstream saw of one request.
type seen struct {
	Auth, APIKey, Query, Body string
}

func recordingHandler(ch chan<- seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ch <- seen{Auth: r.Header.Get("Authorization"), APIKey: r.Header.Get("X-Api-Key"), Query: r.URL.Query().Get("q"), Body: string(body)}
		io.WriteString(w, "recorded")
	})
}

func TestInterceptionInjectsOnlyForBoundHosts(t *testing.T) {
	pki := newTestPKI(t)
	apiSeen, otherSeen := make(chan seen, 1), make(chan seen, 1)
	apiPort := pki.tlsUpstream(t, recordingHandler(apiSeen))
	otherPort := pki.tlsUpstream(t, recordingHandler(otherSeen))
	api, other := hostPort("api.example.test", apiPort), hostPort("other.example.test", otherPort)
	ph := Placeholder("API_KEY")
	binding := Binding{Name: "API_KEY", Placeholder: ph, Value: secretValue, Hosts: []Rule{{Host: "api.example.test", Port: apiPort}}}
	h := startGateway(t, pinnedConfig(pki), []string{api, other}, []Binding{binding})

	send := func(client *http.Client, target string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", "https://"+target+"/v1?q="+url.QueryEscape(ph), strings.NewReader("body "+ph))
		req.Header.Set("Authorization", "Bearer "+ph)
		req.Header.Set("X-Api-Key", ph)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", target, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	// The bound host is reached through the run CA: the client trusts it only.
	apiClient, apiTr := h.client(t, h.runCAPool(t))
	resp := send(apiClient, api)
	if got, want := resp.TLS.PeerCertificates[0].Issuer.CommonName, "agent-runner egress run CA"; got != want {
		t.Errorf("bound host's certificate issuer = %q, want %q", got, want)
	}
	got := <-apiSeen
	want := seen{Auth: "Bearer " + secretValue, APIKey: secretValue, Query: ph, Body: "body " + ph}
	if got != want {
		t.Errorf("bound upstream saw %+v, want %+v (value in headers only)", got, want)
	}

	// An allowed, unbound host is tunneled: its own certificate, the placeholder untouched.
	otherClient, otherTr := h.client(t, pki.roots)
	send(otherClient, other)
	if got, want := <-otherSeen, (seen{Auth: "Bearer " + ph, APIKey: ph, Query: ph, Body: "body " + ph}); got != want {
		t.Errorf("unbound upstream saw %+v, want %+v", got, want)
	}

	apiTr.CloseIdleConnections()
	otherTr.CloseIdleConnections()
	modes := map[string]Decision{}
	for range 2 {
		d := h.next(t)
		modes[d.Host] = d
	}
	if d := modes["api.example.test"]; d.Mode != ModeIntercept || !d.Allowed || d.BytesUp == 0 {
		t.Errorf("bound host decision = %+v, want an allowed intercept", d)
	}
	if d := modes["other.example.test"]; d.Mode != ModeTunnel || !d.Allowed {
		t.Errorf("unbound host decision = %+v, want an allowed tunnel", d)
	}
	assertNoSecret(t, h)
}

// assertNoSecret checks the audit records, the log and the metrics for the
// secret value.
func assertNoSecret(t *testing.T, h *harness) {
	t.Helper()
	h.mu.Lock()
	records, _ := json.Marshal(h.all)
	h.mu.Unlock()
	if strings.Contains(string(records), secretValue) {
		t.Errorf("the audit records hold the secret value: %s", records)
	}
	if strings.Contains(h.logs.String(), secretValue) {
		t.Errorf("the log holds the secret value: %s", h.logs.String())
	}
	if h.logs.String() == "" {
		t.Error("the gateway logged nothing: the log check checked nothing")
	}
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if metrics := fmt.Sprint(families); strings.Contains(metrics, secretValue) || !strings.Contains(metrics, "agent_runner_egress_connections_total") {
		t.Errorf("metrics hold the secret value or lack the connection counter: %s", metrics)
	}
}

func TestInterceptRefusesAnotherHost(t *testing.T) {
	pki := newTestPKI(t)
	port := pki.tlsUpstream(t, okHandler("ok"))
	api := hostPort("api.example.test", port)
	binding := Binding{Name: "K", Placeholder: Placeholder("K"), Value: secretValue, Hosts: []Rule{{Host: "api.example.test", Port: port}}}
	h := startGateway(t, pinnedConfig(pki), []string{api}, []Binding{binding})
	c, _, _ := h.connect(t, api)
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.test", RootCAs: h.runCAPool(t)})
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: other.example.test\r\nAuthorization: Bearer "+binding.Placeholder+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(body), "host_mismatch") {
		t.Errorf("answer = %d %q, want 403 host_mismatch", resp.StatusCode, body)
	}
	if d := h.next(t); d.Allowed || d.Rule != ReasonHostMismatch || d.Mode != ModeIntercept {
		t.Errorf("decision = %+v, want a refused intercept (host_mismatch)", d)
	}
}

func TestInterceptUpstreamUnverified(t *testing.T) {
	pki := newTestPKI(t)
	port := pki.tlsUpstream(t, okHandler("ok"))
	api := hostPort("api.example.test", port)
	cfg := pinnedConfig(pki)
	cfg.UpstreamRoots = newTestPKI(t).roots // another root: the upstream does not verify
	binding := Binding{Name: "K", Placeholder: Placeholder("K"), Value: secretValue, Hosts: []Rule{{Host: "api.example.test", Port: port}}}
	h := startGateway(t, cfg, []string{api}, []Binding{binding})
	client, _ := h.client(t, h.runCAPool(t))
	req, _ := http.NewRequest("GET", "https://"+api+"/", nil)
	req.Header.Set("Authorization", "Bearer "+binding.Placeholder)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(body), "upstream_tls") {
		t.Errorf("answer = %d %q, want 502 upstream_tls", resp.StatusCode, body)
	}
	if d := h.next(t); d.Allowed || d.Rule != ReasonUpstreamTLS {
		t.Errorf("decision = %+v, want upstream_tls", d)
	}
}

// sseHandler sends one event, waits for release, then sends another.
func sseHandler(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: two\n\n")
	})
}

func TestStreamingArrivesIncrementally(t *testing.T) {
	pki := newTestPKI(t)
	for _, mode := range []string{ModeIntercept, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			release := make(chan struct{})
			var target string
			var h *harness
			var client *http.Client
			if mode == ModeIntercept {
				port := pki.tlsUpstream(t, sseHandler(release))
				sse := hostPort("sse.example.test", port)
				binding := Binding{Name: "K", Placeholder: Placeholder("K"), Value: secretValue, Hosts: []Rule{{Host: "sse.example.test", Wildcard: false, Port: port}}}
				h = startGateway(t, pinnedConfig(pki), []string{sse}, []Binding{binding})
				client, _ = h.client(t, h.runCAPool(t))
				target = "https://" + sse + "/events"
			} else {
				port := plainUpstream(t, sseHandler(release))
				h = startGateway(t, pinnedConfig(pki), []string{hostPort("plain.example.test", port)}, nil)
				client, _ = h.client(t, nil)
				target = "http://" + hostPort("plain.example.test", port) + "/events"
			}
			resp, err := client.Get(target)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			defer resp.Body.Close()
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if sc.Text() != "" {
						lines <- sc.Text()
					}
				}
			}()
			select {
			case got := <-lines:
				if got != "data: one" {
					t.Errorf("first event = %q, want %q", got, "data: one")
				}
			case <-time.After(5 * time.Second):
				t.Error("the first event did not arrive before the stream ended: the gateway buffers")
			}
			close(release)
			if got := <-lines; got != "data: two" {
				t.Errorf("second event = %q, want %q", got, "data: two")
			}
			for range lines {
			}
		})
	}
}

func TestCurlThroughInterception(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	pki := newTestPKI(t)
	apiSeen := make(chan seen, 1)
	port := pki.tlsUpstream(t, recordingHandler(apiSeen))
	api := hostPort("api.example.test", port)
	binding := Binding{Name: "K", Placeholder: Placeholder("K"), Value: secretValue, Hosts: []Rule{{Host: "api.example.test", Port: port}}}
	h := startGateway(t, pinnedConfig(pki), []string{api}, []Binding{binding})
	caFile := filepath.Join(t.TempDir(), "run-ca.pem")
	if err := os.WriteFile(caFile, h.ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), curl, "-sS", "--fail", "--max-time", "10", "--proxy", "http://"+h.addr,
		"--cacert", caFile, "-H", "Authorization: Bearer "+binding.Placeholder, "https://"+api+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	if got, want := string(out), "recorded"; got != want {
		t.Errorf("curl output = %q, want %q", got, want)
	}
	if got := <-apiSeen; got.Auth != "Bearer "+secretValue {
		t.Errorf("upstream Authorization = %q, want the real value", got.Auth)
	}
	if d := h.next(t); d.Mode != ModeIntercept || !d.Allowed {
		t.Errorf("decision = %+v, want an allowed intercept", d)
	}
	assertNoSecret(t, h)
}
