package egress

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rule
	}{
		{"api.example.com", Rule{Host: "api.example.com"}},
		{"API.Example.COM.", Rule{Host: "api.example.com"}},
		{" api.example.com:8443 ", Rule{Host: "api.example.com", Port: 8443}},
		{"*.example.com", Rule{Host: "example.com", Wildcard: true}},
		{"*.example.com:443", Rule{Host: "example.com", Wildcard: true, Port: 443}},
		{"localhost", Rule{Host: "localhost"}},
		{"xn--bcher-kva.example", Rule{Host: "xn--bcher-kva.example"}},
		{"example.cafe", Rule{Host: "example.cafe"}},
	} {
		got, err := ParseRule(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRule(%q) = %+v, %v, want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"", " ", "*", "*.com", "*.", "api.*.com", "a*.example.com", "1.2.3.4", "[::1]", "::1", "[::1]:443",
		"127.1", "0x7f.1", "2130706433", "api.example.com:0", "api.example.com:65536", "api.example.com:x",
		"api.example.com:", "api.example.com:+1", "api_x.example.com", "bücher.example", "-a.example.com",
		"a..example.com", "http://api.example.com", "api.example.com/path", strings.Repeat("a", 64) + ".com",
	} {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("ParseRule(%q) = %+v, want an error", in, r)
		} else if job.CodeOf(err) != job.CodeInvalidRequest {
			t.Errorf("ParseRule(%q) error code = %q, want %q", in, job.CodeOf(err), job.CodeInvalidRequest)
		}
	}
}

func TestRuleStringRoundTrips(t *testing.T) {
	for _, in := range []string{"api.example.com", "*.example.com", "api.example.com:8443", "*.example.com:80"} {
		r, err := ParseRule(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.String(); got != in {
			t.Errorf("ParseRule(%q).String() = %q, want %q", in, got, in)
		}
	}
}

func mustRules(t *testing.T, ss ...string) []Rule {
	t.Helper()
	rs, err := ParseRules(ss)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestRuleMatch(t *testing.T) {
	for _, tc := range []struct {
		rule, host string
		port       int
		want       bool
	}{
		{"api.example.com", "api.example.com", 443, true},
		{"api.example.com", "API.example.com.", 80, true},
		{"api.example.com", "api.example.com", 8443, false},
		{"api.example.com", "x.api.example.com", 443, false},
		{"api.example.com", "example.com", 443, false},
		{"api.example.com:8443", "api.example.com", 8443, true},
		{"api.example.com:8443", "api.example.com", 443, false},
		{"*.example.com", "api.example.com", 443, true},
		{"*.example.com", "a.b.example.com", 443, true},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "badexample.com", 443, false},
		{"*.example.com", "api.example.com.evil.test", 443, false},
		{"*.example.com:8080", "api.example.com", 8080, true},
		{"*.example.com:8080", "api.example.com", 443, false},
	} {
		r := mustRules(t, tc.rule)[0]
		if got := r.Match(tc.host, tc.port); got != tc.want {
			t.Errorf("ParseRule(%q).Match(%q, %d) = %v, want %v", tc.rule, tc.host, tc.port, got, tc.want)
		}
	}
}

func TestWithin(t *testing.T) {
	ceiling := mustRules(t, "api.example.com", "*.github.com", "uploads.example.net:8443", "*.cdn.example.org:443")
	for _, tc := range []struct {
		req, outside []string
	}{
		{[]string{"api.example.com"}, nil},
		{[]string{"api.example.com:443", "api.example.com:80"}, nil},
		{[]string{"api.example.com:8443"}, []string{"api.example.com:8443"}},
		{[]string{"x.api.example.com"}, []string{"x.api.example.com"}},
		{[]string{"*.api.example.com"}, []string{"*.api.example.com"}},
		{[]string{"raw.github.com", "*.github.com", "*.api.github.com:443"}, nil},
		{[]string{"github.com"}, []string{"github.com"}},
		{[]string{"uploads.example.net:8443"}, nil},
		{[]string{"uploads.example.net"}, []string{"uploads.example.net"}},
		{[]string{"a.cdn.example.org:443"}, nil},
		{[]string{"a.cdn.example.org"}, []string{"a.cdn.example.org"}},
		{[]string{"*.example.org:443"}, []string{"*.example.org:443"}},
		{[]string{"evil.test", "api.example.com"}, []string{"evil.test"}},
	} {
		var got []string
		for _, r := range Within(mustRules(t, tc.req...), ceiling) {
			got = append(got, r.String())
		}
		if !cmp.Equal(got, tc.outside) {
			t.Errorf("Within(%q, ceiling) = %q, want %q", tc.req, got, tc.outside)
		}
	}
	// Two ceiling rules together cover a request for both default ports.
	if got := Within(mustRules(t, "a.example.com"), mustRules(t, "a.example.com:443", "a.example.com:80")); got != nil {
		t.Errorf("Within(a.example.com, [:443 :80]) = %v, want none outside", got)
	}
}

func TestParseResolve(t *testing.T) {
	got, err := ParseResolve([]string{"api.example.com:443:10.0.0.5", "Mirror.Example.com:*:192.168.1.2", "v6.example.com:8443:[fd00::1]", "v6b.example.com:80:fd00::2"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"api.example.com:443": "10.0.0.5", "mirror.example.com": "192.168.1.2", "v6.example.com:8443": "fd00::1", "v6b.example.com:80": "fd00::2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseResolve mismatch (-want +got):\n%s", diff)
	}
	for _, in := range []string{"api.example.com:443", "api.example.com:443:host.example", "1.2.3.4:443:5.6.7.8", "*.example.com:443:1.2.3.4",
		"api.example.com:0:1.2.3.4", "api.example.com:443:1.2.3.4,5.6.7.8", "a.example.com:443:fe80::1%eth0"} {
		if _, err := ParseResolve([]string{in}); err == nil {
			t.Errorf("ParseResolve(%q) = nil error, want one", in)
		}
	}
	if _, err := ParseResolve([]string{"a.example.com:443:1.2.3.4", "a.example.com:443:1.2.3.5"}); err == nil {
		t.Error("ParseResolve of two addresses for one name and port = nil error, want one")
	}
	if _, err := New(Config{Resolve: map[string]string{"a.example.com:443": "not-an-ip"}}); err == nil {
		t.Error("New with a bad pin = nil error, want one")
	}
}

func TestInternalAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true}, {"10.1.2.3", true}, {"172.16.0.1", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"100.64.0.1", true}, {"100.127.255.254", true}, {"0.0.0.0", true},
		{"224.0.0.1", true}, {"255.255.255.255", true}, {"::1", true}, {"::", true}, {"fc00::1", true},
		{"fd12::1", true}, {"fe80::1", true}, {"ff02::1", true}, {"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true}, {"64:ff9b::a9fe:a9fe", true}, {"2002:a00:1::1", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"100.128.0.1", false}, {"2606:4700::1111", false},
		{"64:ff9b::808:808", false}, {"::ffff:8.8.8.8", false},
	} {
		if got := internalAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("internalAddr(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestResolveRefusesInternalAndOwnAddresses(t *testing.T) {
	g, err := New(Config{Resolve: map[string]string{"pinned.example.com": "10.0.0.9"}})
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string][]netip.Addr{
		"public.example.com": {netip.MustParseAddr("93.184.215.14")},
		"mixed.example.com":  {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.1")},
		"metadata.example":   {netip.MustParseAddr("169.254.169.254")},
		"self.example.com":   {netip.MustParseAddr("203.0.113.77")},
	}
	g.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := answers[host]; ok {
			return a, nil
		}
		return nil, errText("no such host")
	}
	g.local = &localAddrs{ifAddrs: func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("203.0.113.77"), Mask: net.CIDRMask(24, 32)}}, nil
	}}
	for _, tc := range []struct {
		host   string
		reason string
	}{
		{"public.example.com", ""},
		{"pinned.example.com", ""},
		{"mixed.example.com", ReasonInternalAddress},
		{"metadata.example", ReasonInternalAddress},
		{"self.example.com", ReasonInternalAddress},
		{"missing.example.com", ReasonResolveFailed},
	} {
		_, f := g.resolve(t.Context(), tc.host, 443)
		got := ""
		if f != nil {
			got = f.reason
		}
		if got != tc.reason {
			t.Errorf("resolve(%q) refusal = %q, want %q", tc.host, got, tc.reason)
		}
	}
}

func TestPlaceholder(t *testing.T) {
	a, b := Placeholder("API_KEY"), Placeholder("API_KEY")
	if !regexp.MustCompile(`^agent-runner-placeholder-API_KEY-[0-9a-f]{32}$`).MatchString(a) {
		t.Errorf("Placeholder(API_KEY) = %q, want agent-runner-placeholder-API_KEY-<32 hex>", a)
	}
	if a == b {
		t.Errorf("two placeholders for one name are equal: %q", a)
	}
}

func TestInject(t *testing.T) {
	b := Binding{Name: "K", Placeholder: Placeholder("K"), Value: "real"}
	other := Binding{Name: "O", Placeholder: Placeholder("O"), Value: "other-real"}
	h := http.Header{"Authorization": {"Bearer " + b.Placeholder}, "X-Both": {b.Placeholder + "," + b.Placeholder, other.Placeholder}}
	inject(h, []Binding{b})
	want := http.Header{"Authorization": {"Bearer real"}, "X-Both": {"real,real", other.Placeholder}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("inject mismatch (-want +got):\n%s", diff)
	}
	if got, want := redact("upstream said: real token", []Binding{b}), "upstream said: [redacted K] token"; got != want {
		t.Errorf("redact = %q, want %q", got, want)
	}
}

func TestCheckBindings(t *testing.T) {
	ok := Binding{Name: "K", Placeholder: Placeholder("K"), Value: "secret-value", Hosts: []Rule{{Host: "a.test"}}}
	if err := checkBindings([]Binding{ok}); err != nil {
		t.Fatalf("checkBindings(valid) = %v", err)
	}
	for name, mutate := range map[string]func(*Binding){
		"no name":            func(b *Binding) { b.Name = "" },
		"short placeholder":  func(b *Binding) { b.Placeholder = "x" },
		"empty value":        func(b *Binding) { b.Value = "" },
		"value in header":    func(b *Binding) { b.Value = "secret-value\r\nX-Injected: 1" },
		"no hosts":           func(b *Binding) { b.Hosts = nil },
		"value in placehold": func(b *Binding) { b.Value = b.Placeholder[3:9] },
	} {
		b := ok
		mutate(&b)
		err := checkBindings([]Binding{b})
		if err == nil {
			t.Errorf("checkBindings(%s) = nil, want an error", name)
		} else if b.Value != "" && strings.Contains(err.Error(), b.Value) {
			t.Errorf("checkBindings(%s) error %q holds the value", name, err)
		}
	}
}

func TestDecisionJSON(t *testing.T) {
	d := Decision{Time: time.Unix(0, 0).UTC(), Run: "r", Host: "h", Port: 443, Addr: "1.2.3.4:443", Mode: ModeTunnel,
		Allowed: true, Rule: "h", BytesUp: 1, BytesDown: 2, Error: "e", Duration: time.Second}
	b, _ := json.Marshal(d)
	want := `{"time":"1970-01-01T00:00:00Z","run":"r","host":"h","port":443,"addr":"1.2.3.4:443","mode":"tunnel","allowed":true,"rule":"h","bytes_up":1,"bytes_down":2,"error":"e","duration_ns":1000000000}`
	if got := string(b); got != want {
		t.Errorf("Decision JSON = %s, want %s", got, want)
	}
}

func TestHeaderHelpers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody", 27},
		{"GET / HTTP/1.1\nHost: a\n\nbody", 24},
		{"GET / HTTP/1.1\r\nHost: a\r\n", -1},
	} {
		if got := headerEnd([]byte(tc.in)); got != tc.want {
			t.Errorf("headerEnd(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if got, want := hostHeaders([]byte("GET http://a/ HTTP/1.1\r\nhOsT:  b.test \r\nX-Host: c\r\nHost: d\r\n")), []string{"b.test", "d"}; !cmp.Equal(got, want) {
		t.Errorf("hostHeaders = %q, want %q", got, want)
	}
}
