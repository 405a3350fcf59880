package egress

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-runner/agent-runner/job"
)

// Decision is the audit record of one connection, written when it ends,
// or (ModeSummary) of refusals counted rather than recorded one by one,
// or (ModeTruncated) the mark of an audit log at its byte cap. It never
// holds a secret's value.
type Decision struct {
	// Time is when the connection was accepted; of a summary, when the
	// first refusal it counts was.
	Time time.Time `json:"time"`
	// Last is, of a summary, when the last refusal it counts was.
	Last time.Time `json:"last,omitzero"`
	Run  string    `json:"run"`
	Host string    `json:"host"` // the requested name, lowercase; "*" in a summary of other hosts
	Port int       `json:"port"`
	Addr string    `json:"addr,omitempty"` // the dialed ip:port
	Mode string    `json:"mode"`           // ModeTunnel, ModeHTTP, ModeIntercept, ModeSummary or ModeTruncated
	// Allowed is true when the connection reached its upstream and ended
	// without a refusal.
	Allowed bool `json:"allowed"`
	// Rule is the allowlist rule that matched, or the refusal reason code
	// (Reason*) when Allowed is false.
	Rule      string        `json:"rule"`
	BytesUp   int64         `json:"bytes_up"`   // written to the upstream
	BytesDown int64         `json:"bytes_down"` // read from the upstream
	Error     string        `json:"error,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
	// Count is, of a summary, the number of refusals it stands for.
	Count int64 `json:"count,omitempty"`
}

// Modes of a Decision.
const (
	ModeTunnel    = "tunnel"    // CONNECT, bytes passed through untouched after the SNI check
	ModeHTTP      = "http"      // plain HTTP requests read and forwarded one by one
	ModeIntercept = "intercept" // TLS terminated with the run CA; secrets added to headers
	ModeSummary   = "summary"   // refusals of one (host, reason) counted, not recorded one by one
	ModeTruncated = "truncated" // the audit log's last line: it reached its byte cap
)

// RuleTruncated is the Rule of a ModeTruncated mark.
const RuleTruncated = "max_audit_bytes"

// Refusal reason codes, the Rule of a refused Decision.
const (
	ReasonNotAllowed      = "not_allowed"      // no run rule matches host:port
	ReasonIPLiteral       = "ip_literal"       // the target is an IP address, not a name
	ReasonInternalAddress = "internal_address" // the name resolves to an internal address and is not pinned
	ReasonSNIMismatch     = "sni_mismatch"     // the TLS ClientHello names another host, or none
	ReasonHostMismatch    = "host_mismatch"    // an HTTP Host header names another host
	ReasonNotTLSOrHTTP    = "not_tls_or_http"  // a tunnel's first bytes are neither a ClientHello nor HTTP/1.x
	ReasonResolveFailed   = "resolve_failed"   // the name does not resolve
	ReasonDialFailed      = "dial_failed"      // no resolved address accepted a connection
	ReasonUpstreamTLS     = "upstream_tls"     // an intercepted upstream failed TLS verification
	ReasonBadRequest      = "bad_request"      // not a proxy request, or a malformed one
	ReasonTooMany         = "too_many_connections"
	ReasonTooManyNames    = "too_many_names" // the run already had Config.MaxNames distinct names looked up
)

// reasonText is the readable half of a refusal body.
var reasonText = map[string]string{
	ReasonNotAllowed:      "not in this run's allowlist",
	ReasonIPLiteral:       "IP-literal targets are refused; use a host name",
	ReasonInternalAddress: "resolves to an internal address",
	ReasonSNIMismatch:     "TLS server name does not match the CONNECT host",
	ReasonHostMismatch:    "Host header does not match the target",
	ReasonNotTLSOrHTTP:    "neither TLS nor HTTP/1.x",
	ReasonResolveFailed:   "name did not resolve",
	ReasonDialFailed:      "upstream did not accept the connection",
	ReasonUpstreamTLS:     "upstream TLS verification failed",
	ReasonBadRequest:      "not a proxy request",
	ReasonTooMany:         "too many concurrent connections for this run",
	ReasonTooManyNames:    "this run has looked up as many distinct names as it may",
}

// refusal ends a connection: a reason code and a detail for the audit
// record (never a secret's value).
type refusal struct {
	reason string
	detail string
}

func refuse(reason, detail string) *refusal { return &refusal{reason: reason, detail: detail} }

func (r *refusal) Error() string { return r.reason + ": " + r.detail }

// status is the HTTP status a refusal answers with before a tunnel opens.
func (r *refusal) status() int {
	switch r.reason {
	case ReasonResolveFailed, ReasonDialFailed, ReasonUpstreamTLS:
		return 502
	case ReasonBadRequest:
		return 400
	case ReasonTooMany:
		return 503
	}
	return 403
}

// asRefusal returns the refusal in err's chain, if any.
func asRefusal(err error) *refusal {
	var r *refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// metrics are the gateway's Prometheus collectors.
type metrics struct {
	conns *prometheus.CounterVec
	bytes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_runner_egress_connections_total",
			Help: "Egress gateway connections by decision: allowed, or the refusal reason code.",
		}, []string{"decision"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_runner_egress_bytes_total",
			Help: "Bytes the egress gateway wrote to (up) and read from (down) upstreams.",
		}, []string{"direction"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.conns, err = register(reg, m.conns); err != nil {
		return nil, err
	}
	if m.bytes, err = register(reg, m.bytes); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or reuses the collector another Gateway already
// registered on reg.
func register(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	return nil, job.Wrap(job.CodeInvalidRequest, err, "egress metrics")
}

func (m *metrics) observe(d Decision) {
	label := "allowed"
	if !d.Allowed {
		label = d.Rule
	}
	m.conns.WithLabelValues(label).Inc()
	m.bytes.WithLabelValues("up").Add(float64(d.BytesUp))
	m.bytes.WithLabelValues("down").Add(float64(d.BytesDown))
}
