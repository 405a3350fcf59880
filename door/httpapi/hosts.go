package httpapi

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// loopbackNames are the Host names a server always answers, with any port.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// hostPort is a host (lower case, no brackets, no trailing dot) and a port
// ("" for any port).
type hostPort struct{ host, port string }

// parseHostPort splits "name", "name:port", "[v6]" or "[v6]:port".
func parseHostPort(s string) hostPort {
	s = strings.ToLower(strings.TrimSpace(s))
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		h, p = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ""
	}
	return hostPort{strings.TrimSuffix(h, "."), p}
}

// matches reports whether hp names h: same host, and the same port when hp
// names one.
func (hp hostPort) matches(h hostPort) bool {
	return hp.host != "" && hp.host == h.host && (hp.port == "" || hp.port == h.port)
}

// hostPolicy is which Host headers and Origins a server accepts.
type hostPolicy struct {
	// served are the hosts a request's Host may name: loopback, the
	// listen address's host and the allowed ones.
	served []hostPort
	// allowed are --allowed-host: also trusted as an Origin, any scheme.
	allowed []hostPort
}

func newHostPolicy(listenAddr string, allowed []string) hostPolicy {
	var p hostPolicy
	for _, n := range loopbackNames {
		p.served = append(p.served, hostPort{host: n})
	}
	if h := BindHost(listenAddr); h != "" {
		p.served = append(p.served, hostPort{host: parseHostPort(h).host})
	}
	for _, a := range allowed {
		if hp := parseHostPort(a); hp.host != "" {
			p.served = append(p.served, hp)
			p.allowed = append(p.allowed, hp)
		}
	}
	return p
}

// BindHost is the host of a listen address when it names one interface;
// "" for a wildcard (":3000", "0.0.0.0:3000", "[::]:3000") or an address
// that does not parse.
func BindHost(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil || h == "" {
		return ""
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		return ""
	}
	return h
}

// servesHost reports whether the Host header names a host this server
// serves.
func (p hostPolicy) servesHost(host string) bool {
	h := parseHostPort(host)
	for _, s := range p.served {
		if s.matches(h) {
			return true
		}
	}
	return false
}

// originAllowed reports whether an Origin header value is the origin the
// request came to (scheme, host and port of r) or names an allowed host
// (any scheme, a TLS-terminating proxy's included).
func (p hostPolicy) originAllowed(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	o := withDefaultPort(parseHostPort(u.Host), u.Scheme)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if u.Scheme == scheme && o == withDefaultPort(parseHostPort(r.Host), scheme) {
		return true
	}
	for _, a := range p.allowed {
		if a.matches(o) {
			return true
		}
	}
	return false
}

func withDefaultPort(hp hostPort, scheme string) hostPort {
	if hp.port == "" {
		hp.port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return hp
}
