package egress

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// ParseResolve reads pins written as curl's --resolve: "HOST:PORT:ADDR".
// PORT "*" pins the name for every port. ADDR is one IP address, IPv6 in
// brackets or bare. The result is keyed "host:port" (or "host") as
// Config.Resolve expects.
func ParseResolve(ss []string) (map[string]string, error) {
	pins := make(map[string]string, len(ss))
	for _, s := range ss {
		host, rest, ok := strings.Cut(strings.TrimSpace(s), ":")
		port, addr, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 {
			return nil, job.Errorf(job.CodeInvalidRequest, "resolve %q: want HOST:PORT:ADDR", s)
		}
		key := normalizeHost(host)
		if err := checkHostname(key); err != nil {
			return nil, job.Errorf(job.CodeInvalidRequest, "resolve %q: %v", s, err)
		}
		if port != "*" {
			p, err := parsePort(port)
			if err != nil {
				return nil, job.Errorf(job.CodeInvalidRequest, "resolve %q: %v", s, err)
			}
			key += ":" + strconv.Itoa(p)
		}
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"))
		if err != nil || ip.Zone() != "" {
			return nil, job.Errorf(job.CodeInvalidRequest, "resolve %q: %q is not one IP address", s, addr)
		}
		if old, dup := pins[key]; dup && old != ip.String() {
			return nil, job.Errorf(job.CodeInvalidRequest, "resolve %q: %s is already pinned to %s", s, key, old)
		}
		pins[key] = ip.String()
	}
	return pins, nil
}

// parsePins checks Config.Resolve and normalizes its keys.
func parsePins(m map[string]string) (map[string]netip.Addr, error) {
	pins := make(map[string]netip.Addr, len(m))
	for k, v := range m {
		host, port, hasPort := strings.Cut(k, ":")
		host = normalizeHost(host)
		if err := checkHostname(host); err != nil {
			return nil, job.Errorf(job.CodeInvalidRequest, "resolve pin %q: %v", k, err)
		}
		key := host
		if hasPort {
			p, err := parsePort(port)
			if err != nil {
				return nil, job.Errorf(job.CodeInvalidRequest, "resolve pin %q: %v", k, err)
			}
			key += ":" + strconv.Itoa(p)
		}
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(v, "["), "]"))
		if err != nil || ip.Zone() != "" {
			return nil, job.Errorf(job.CodeInvalidRequest, "resolve pin %q: %q is not one IP address", k, v)
		}
		pins[key] = ip.Unmap()
	}
	return pins, nil
}

// Special-purpose ranges refused besides the ones netip classifies.
var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("fec0::/10"),      // deprecated site-local
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("192.88.99.0/24"), // 6to4 relay anycast
	netip.MustParsePrefix("2002::/16"),      // 6to4: embeds any IPv4 address
	netip.MustParsePrefix("2001::/32"),      // Teredo: embeds any IPv4 address
	netip.MustParsePrefix("ff00::/8"),       // multicast (also IsMulticast)
	netip.MustParsePrefix("255.255.255.255/32"),
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// internalAddr reports whether a is an address the sandbox must not reach
// through the gateway: loopback, private, link-local (cloud metadata
// included), CGNAT, multicast, unspecified, reserved, or an IPv6 form
// embedding such an IPv4 address. The host's own addresses are checked
// apart (localAddrs).
func internalAddr(a netip.Addr) bool {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		return internalAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range internalPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// localAddrs caches this host's interface addresses for a few seconds.
type localAddrs struct {
	mu      sync.Mutex
	at      time.Time
	addrs   map[netip.Addr]bool
	ifAddrs func() ([]net.Addr, error)
}

func (l *localAddrs) contains(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrs == nil || time.Since(l.at) > 10*time.Second {
		l.addrs = map[netip.Addr]bool{}
		l.at = time.Now()
		if as, err := l.ifAddrs(); err == nil {
			for _, x := range as {
				if p, err := netip.ParsePrefix(x.String()); err == nil {
					l.addrs[p.Addr().Unmap()] = true
				}
			}
		}
	}
	return l.addrs[a.Unmap()]
}

// resolved is where a target may be dialed.
type resolved struct {
	addrs  []netip.Addr
	pinned bool
}

// pinned returns the operator's pin of host:port (or of host, for any
// port), if there is one.
func (g *Gateway) pinned(host string, port int) (netip.Addr, bool) {
	if ip, ok := g.pins[host+":"+strconv.Itoa(port)]; ok {
		return ip, true
	}
	ip, ok := g.pins[host]
	return ip, ok
}

// resolve finds the addresses of host:port: the operator's pin, or the
// resolver's answer, refused whole (internal_address) if any address in
// it is internal or one of this host's own.
func (g *Gateway) resolve(ctx context.Context, host string, port int) (resolved, *refusal) {
	if ip, ok := g.pinned(host, port); ok {
		return resolved{addrs: []netip.Addr{ip}, pinned: true}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.dialTimeout)
	defer cancel()
	addrs, err := g.lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		return resolved{}, refuse(ReasonResolveFailed, "name did not resolve")
	}
	for i, a := range addrs {
		a = a.Unmap()
		addrs[i] = a
		if internalAddr(a) || g.local.contains(a) {
			return resolved{addrs: []netip.Addr{a}}, refuse(ReasonInternalAddress, "resolves to an internal address")
		}
	}
	return resolved{addrs: addrs}, nil
}

// dial connects to the first address of r that answers, within the dial
// timeout.
func (g *Gateway) dial(ctx context.Context, r resolved, port int) (net.Conn, string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.dialTimeout)
	defer cancel()
	var d net.Dialer
	var last error
	var addr string
	for _, a := range r.addrs {
		addr = netip.AddrPortFrom(a, uint16(port)).String()
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, addr, nil
		}
		last = err
	}
	return nil, addr, last
}
