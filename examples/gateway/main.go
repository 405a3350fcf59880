// Command gateway is an example policy gateway in front of agent-runner: it
// accepts POST /sandbox/jobs, decides (here: a fixed allow for callers
// presenting X-Caller), copies its decision into the request's trace
// metadata (trace_id, run_id, gateway_policy_action, gateway_policy_id,
// gateway_request_id) without touching any key the caller set, and forwards
// the request to agent-runner's POST /v1/jobs. agent-runner records the
// trace with the job and echoes it unchanged in the result.
//
//	go run ./examples/gateway -listen 127.0.0.1:8080 -upstream http://127.0.0.1:3000
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// PolicyID names the gateway policy that approved a request.
const PolicyID = "agent-tools-v1"

var requestSeq atomic.Int64

// handler returns the gateway: approved POST /sandbox/jobs go to
// upstream/v1/jobs with the decision in trace; everything else is refused.
func handler(upstream *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/sandbox/jobs" {
			http.Error(w, `{"error":{"code":"gateway.route_denied","message":"route not allowed"}}`, http.StatusForbidden)
			return
		}
		caller := r.Header.Get("X-Caller")
		if caller == "" {
			http.Error(w, `{"error":{"code":"gateway.unauthenticated","message":"X-Caller required"}}`, http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"error":{"code":"gateway.body_too_large","message":"body limit"}}`, http.StatusRequestEntityTooLarge)
			return
		}
		id := fmt.Sprintf("gw_req_%03d", requestSeq.Add(1))
		out, err := withDecision(body, map[string]string{
			"trace_id":              "tr_" + id,
			"run_id":                "run_" + caller,
			"gateway_policy_action": "allow",
			"gateway_policy_id":     PolicyID,
			"gateway_request_id":    id,
		})
		if err != nil {
			http.Error(w, `{"error":{"code":"gateway.bad_request","message":"body is not a JSON object"}}`, http.StatusBadRequest)
			return
		}
		r.URL.Path = "/v1/jobs"
		r.Body = io.NopCloser(bytes.NewReader(out))
		r.ContentLength = int64(len(out))
		r.Header.Del("Content-Length")
		proxy.ServeHTTP(w, r)
	})
}

// withDecision adds the decision keys to body's trace object, keeping every
// key (and value bytes) the caller sent; a key the caller already set wins.
func withDecision(body []byte, decision map[string]string) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	trace := bytes.TrimSpace(req["trace"])
	if len(trace) == 0 || bytes.Equal(trace, []byte("null")) {
		trace = []byte("{}")
	}
	var existing map[string]json.RawMessage
	if err := json.Unmarshal(trace, &existing); err != nil {
		return nil, err
	}
	inner := bytes.TrimSpace(trace[1 : len(trace)-1])
	buf := append([]byte("{"), inner...)
	for _, k := range []string{"trace_id", "run_id", "gateway_policy_action", "gateway_policy_id", "gateway_request_id"} {
		if _, ok := existing[k]; ok {
			continue
		}
		if len(bytes.TrimSpace(buf[1:])) > 0 {
			buf = append(buf, ',')
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(decision[k])
		buf = append(append(append(buf, kb...), ':'), vb...)
	}
	req["trace"] = append(buf, '}')
	return json.Marshal(req)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "gateway address")
	upstream := flag.String("upstream", "http://127.0.0.1:3000", "agent-runner URL")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("gateway on %s -> %s", *listen, u)
	log.Fatal(http.ListenAndServe(*listen, handler(u)))
}
