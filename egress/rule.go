package egress

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// Rule is one allowlist entry: "api.example.com" (that name only),
// "*.example.com" (any subdomain, not the apex), each with an optional
// ":port". A rule without a port allows 443 and 80.
type Rule struct {
	Host     string // lowercase, no trailing dot, without the "*." of a wildcard
	Wildcard bool
	Port     int // 0: 443 and 80
}

// defaultPorts are the ports a rule without a port allows.
var defaultPorts = []int{443, 80}

// ParseRule parses one allowlist entry. It refuses empty entries, IP
// addresses, characters outside [a-z0-9.-] (use the punycode form of an
// internationalized name), "*" alone, wildcards over a single label
// ("*.com") and ports outside 1..65535. Case is folded and a trailing
// dot trimmed.
func ParseRule(s string) (Rule, error) {
	in := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Rule{}, job.Errorf(job.CodeInvalidRequest, "egress rule is empty")
	}
	var r Rule
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p, err := parsePort(s[i+1:])
		if err != nil {
			return Rule{}, job.Errorf(job.CodeInvalidRequest, "egress rule %q: %v", in, err)
		}
		r.Port, s = p, s[:i]
	}
	s = strings.TrimSuffix(s, ".")
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		r.Wildcard, s = true, rest
		if !strings.Contains(s, ".") {
			return Rule{}, job.Errorf(job.CodeInvalidRequest, "egress rule %q: a wildcard must cover a domain of at least two labels (*.example.com)", in)
		}
	}
	if err := checkHostname(s); err != nil {
		return Rule{}, job.Errorf(job.CodeInvalidRequest, "egress rule %q: %v", in, err)
	}
	r.Host = s
	return r, nil
}

// ParseRules parses each entry; the first bad one is the error.
func ParseRules(ss []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(ss))
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// String is the rule as ParseRule reads it.
func (r Rule) String() string {
	s := r.Host
	if r.Wildcard {
		s = "*." + s
	}
	if r.Port != 0 {
		s += ":" + strconv.Itoa(r.Port)
	}
	return s
}

// Match reports whether the rule allows host:port. host is compared
// without case and without a trailing dot.
func (r Rule) Match(host string, port int) bool {
	return r.matchHost(normalizeHost(host)) && r.allowsPort(port)
}

func (r Rule) matchHost(host string) bool {
	if !r.Wildcard {
		return host == r.Host
	}
	return len(host) > len(r.Host)+1 && strings.HasSuffix(host, r.Host) && host[len(host)-len(r.Host)-1] == '.'
}

func (r Rule) allowsPort(port int) bool {
	if r.Port == 0 {
		return port == 443 || port == 80
	}
	return port == r.Port
}

// ports lists the ports the rule allows.
func (r Rule) ports() []int {
	if r.Port == 0 {
		return defaultPorts
	}
	return []int{r.Port}
}

// covers reports whether every host r matches is also matched by c (ports
// aside): an exact name within an equal name or a wildcard above it, a
// wildcard only within an equal or broader wildcard.
func (c Rule) covers(r Rule) bool {
	if !c.Wildcard {
		return !r.Wildcard && r.Host == c.Host
	}
	return r.Host == c.Host && r.Wildcard || c.matchHost(r.Host)
}

// Within returns the rules of req that the operator's ceiling does not
// cover; a request can only narrow the ceiling. Each host and port a req
// rule allows must be allowed by a ceiling rule that covers its host.
func Within(req, ceiling []Rule) (outside []Rule) {
	for _, r := range req {
		for _, p := range r.ports() {
			if !coveredPort(r, p, ceiling) {
				outside = append(outside, r)
				break
			}
		}
	}
	return outside
}

func coveredPort(r Rule, port int, ceiling []Rule) bool {
	for _, c := range ceiling {
		if c.covers(r) && c.allowsPort(port) {
			return true
		}
	}
	return false
}

// checkHostname accepts a DNS name of letters, digits and hyphens in
// labels of 1 to 63 characters, at most 253 in all, whose last label is
// not numeric (so that no spelling of an IPv4 address passes).
func checkHostname(s string) error {
	if s == "" || s == "*" {
		return errText("a host name is required")
	}
	if _, err := netip.ParseAddr(s); err == nil || strings.ContainsAny(s, "[]") {
		return errText("IP addresses are not allowed; name the host")
	}
	if len(s) > 253 {
		return errText("host name longer than 253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errText("empty or over-long label")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return errText("a label starts or ends with '-'")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return errText("character " + strconv.QuoteRune(rune(c)) + " not allowed in a host name")
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return errText("IP addresses are not allowed; name the host")
	}
	return nil
}

// numeric reports whether a label reads as a number to inet_aton: decimal
// digits, or "0x" and hex digits.
func numeric(s string) bool {
	digits := "0123456789"
	if rest, ok := strings.CutPrefix(s, "0x"); ok {
		s, digits = rest, "0123456789abcdef"
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(digits, s[i]) < 0 {
			return false
		}
	}
	return true
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || s[0] == '+' || s[0] == '0' {
		return 0, errText("port " + strconv.Quote(s) + " is not in 1..65535")
	}
	return p, nil
}

func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// errText is a plain error message that callers wrap with a code.
type errText string

func (e errText) Error() string { return string(e) }
