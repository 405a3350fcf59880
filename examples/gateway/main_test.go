package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTraceRoundTripsThroughGatewayAndRunner forwards a request with
// Ferrum-style and unknown trace keys through the gateway to a real
// agent-runner serve, and checks the result's trace is byte for byte what
// the runner received: the caller's keys and values untouched, in order,
// plus the gateway's decision.
func TestTraceRoundTripsThroughGatewayAndRunner(t *testing.T) {
	dir := t.TempDir()
	// serve's default backend is linux_sandbox, whose uid must reach the
	// store (t.TempDir's parent is 0700).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "agent-runner")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/agent-runner").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "serve", "--addr", addr, "--store-dir", filepath.Join(dir, "store"), "--log-level", "error", "--workspace-root", os.TempDir())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	base := "http://" + addr
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not start")
		}
	}
	// A recorder between the gateway and the runner keeps the exact bytes
	// the runner received.
	runnerURL, _ := url.Parse(base)
	seen := make(chan []byte, 1)
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- b
		r.Body = io.NopCloser(bytes.NewReader(b))
		httputil.NewSingleHostReverseProxy(runnerURL).ServeHTTP(w, r)
	}))
	defer recorder.Close()
	recorderURL, _ := url.Parse(recorder.URL)
	gw := httptest.NewServer(handler(recorderURL))
	defer gw.Close()
	ws := t.TempDir()
	trace := `{"trace_id":"tr_ferrum_001","session_id":"sess_001","episode_id":"ep_001","agent_id":"forge-agent","ferrum_stack_layer":"tooling","unknown_nested":{"b":[1,2.50,"x"],"a":null}}`
	body := `{"trace":` + trace + `,"workspace":{"path":"` + ws + `"},"command":{"argv":["true"]},"policy":{"allowed_commands":["true"]}}`
	// The gateway's own front door is /sandbox/jobs, in front of the recorder.
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/sandbox/jobs", bytes.NewBufferString(body))
	req.Header.Set("X-Caller", "ci")
	req.Header.Set("Content-Type", "application/json") // serve refuses other bodies (415)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var acc struct {
		JobID string `json:"job_id"`
	}
	json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("gateway -> runner = %d", resp.StatusCode)
	}
	forwarded := <-seen
	var fwd struct{ Trace json.RawMessage }
	json.Unmarshal(forwarded, &fwd)
	var want bytes.Buffer
	json.Compact(&want, fwd.Trace)

	var got bytes.Buffer
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := http.Get(base + "/v1/jobs/" + acc.JobID + "?wait=5s")
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Status string
			Trace  json.RawMessage
		}
		json.NewDecoder(r.Body).Decode(&res)
		r.Body.Close()
		if res.Status == "completed" {
			json.Compact(&got, res.Trace)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job status %s", res.Status)
		}
	}
	if got.String() != want.String() {
		t.Errorf("trace changed in the runner:\nsent %s\ngot  %s", want.String(), got.String())
	}
	wantPrefix := trace[:len(trace)-1]
	if !bytes.HasPrefix(got.Bytes(), []byte(wantPrefix)) {
		t.Errorf("the caller's trace keys were not kept byte for byte in order:\n%s", got.String())
	}
	for _, k := range []string{`"gateway_policy_action":"allow"`, `"gateway_policy_id":"agent-tools-v1"`, `"gateway_request_id":"gw_req_`, `"run_id":"run_ci"`} {
		if !bytes.Contains(got.Bytes(), []byte(k)) {
			t.Errorf("trace lacks %s: %s", k, got.String())
		}
	}
	if bytes.Contains(got.Bytes(), []byte(`"trace_id":"tr_gw`)) {
		t.Error("the gateway overwrote the caller's trace_id")
	}
}
