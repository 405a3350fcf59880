package egress

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Host, body)
	})
}

func TestAbsoluteURINewTargetNewDecision(t *testing.T) {
	pki := newTestPKI(t)
	plainPort, otherPort := plainUpstream(t, echoHandler()), plainUpstream(t, echoHandler())
	plain, other := hostPort("plain.example.test", plainPort), hostPort("other.example.test", otherPort)
	h := startGateway(t, pinnedConfig(pki), []string{plain, other}, nil)
	c, br := h.dial(t)
	for _, target := range []string{plain, other, "api.evil.test"} {
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	c.Close()
	for _, want := range []struct {
		host    string
		allowed bool
		rule    string
	}{{"plain.example.test", true, plain}, {"other.example.test", true, other}, {"api.evil.test", false, ReasonNotAllowed}} {
		if d := h.next(t); d.Host != want.host || d.Allowed != want.allowed || d.Rule != want.rule {
			t.Errorf("decision = %+v, want host %s allowed %v rule %s", d, want.host, want.allowed, want.rule)
		}
	}
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			counts[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if counts["agent_runner_egress_connections_total/allowed"] != 2 || counts["agent_runner_egress_connections_total/not_allowed"] != 1 ||
		counts["agent_runner_egress_bytes_total/up"] == 0 || counts["agent_runner_egress_bytes_total/down"] == 0 {
		t.Errorf("metrics = %v, want 2 allowed, 1 not_allowed, bytes both ways", counts)
	}
}

func TestExpectContinue(t *testing.T) {
	pki := newTestPKI(t)
	port := plainUpstream(t, echoHandler())
	plain := hostPort("plain.example.test", port)
	h := startGateway(t, pinnedConfig(pki), []string{plain}, nil)
	c, br := h.dial(t)
	fmt.Fprintf(c, "POST http://%s/ HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", plain, plain)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("first answer line = %q, %v, want 100 Continue", line, err)
	}
	br.ReadString('\n') // the blank line
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if got, want := string(body), "POST "+plain+" hello"; got != want {
		t.Errorf("upstream echoed %q, want %q", got, want)
	}
}

func TestUpgradePassesThrough(t *testing.T) {
	pki := newTestPKI(t)
	port := plainUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" || r.Header.Get("Connection") != "Upgrade" {
			http.Error(w, "want Upgrade: echo", 400)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		rw.WriteString("echo " + line)
		rw.Flush()
	}))
	plain := hostPort("plain.example.test", port)
	h := startGateway(t, pinnedConfig(pki), []string{plain}, nil)
	c, br := h.dial(t)
	fmt.Fprintf(c, "GET http://%s/ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", plain, plain)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade answer = %v, %v, want 101", resp, err)
	}
	io.WriteString(c, "ping\n")
	if got, err := bufio.NewReader(br).ReadString('\n'); got != "echo ping\n" {
		t.Errorf("after the upgrade read %q, %v, want %q", got, err, "echo ping\n")
	}
}

func TestPlainHTTPNeverGetsTheValue(t *testing.T) {
	pki := newTestPKI(t)
	seenCh := make(chan seen, 2)
	port := plainUpstream(t, recordingHandler(seenCh))
	plain := hostPort("plain.example.test", port)
	binding := Binding{Name: "K", Placeholder: Placeholder("K"), Value: secretValue, Hosts: []Rule{{Host: "plain.example.test", Port: port}}}
	h := startGateway(t, pinnedConfig(pki), []string{plain}, []Binding{binding})

	// An absolute-URI request, then plain HTTP inside a CONNECT tunnel.
	c, br := h.dial(t)
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", plain, plain, binding.Placeholder)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("absolute-URI request = %v, %v", resp, err)
	}
	tc, tbr, _ := h.connect(t, plain)
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", plain, binding.Placeholder)
	if resp, err := http.ReadResponse(tbr, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP in a tunnel = %v, %v", resp, err)
	}
	for range 2 {
		if got, want := (<-seenCh).Auth, "Bearer "+binding.Placeholder; got != want {
			t.Errorf("plain HTTP upstream saw Authorization %q, want the placeholder %q", got, want)
		}
	}
}
