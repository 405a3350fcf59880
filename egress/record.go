package egress

import (
	"log/slog"
	"net"
	"sync/atomic"
	"time"
)

// Log attribute keys.
const (
	logKeyRun     = "run"
	logKeyHost    = "host"
	logKeyPort    = "port"
	logKeyAddr    = "addr"
	logKeyMode    = "mode"
	logKeyAllowed = "allowed"
	logKeyRule    = "rule"
	logKeyUp      = "bytes_up"
	logKeyDown    = "bytes_down"
	logKeyError   = "error"
)

// record is a Decision being built while its connection lives.
type record struct {
	d       Decision
	rule    string // the matching rule, once checked
	refusal *refusal
	err     string
	up      atomic.Int64
	down    atomic.Int64
}

func (s *session) newRecord(start time.Time) *record {
	return &record{d: Decision{Time: start, Run: s.run.ID}}
}

// refuse marks the record refused; the first refusal stands.
func (r *record) refuse(f *refusal) {
	if r.refusal == nil {
		r.refusal = f
	}
}

// fail notes an error that did not refuse the connection.
func (r *record) fail(msg string) {
	if r.err == "" {
		r.err = msg
	}
}

// emit completes the record and hands it to the metrics, and, for an
// allowed connection or a refusal the run's refusals let through, to the
// audit sink and the log. Secret values are redacted from the error text.
func (s *session) emit(r *record) {
	d := r.d
	d.Duration = time.Since(d.Time)
	d.BytesUp, d.BytesDown = r.up.Load(), r.down.Load()
	switch {
	case r.refusal != nil:
		d.Rule, d.Error = r.refusal.reason, r.refusal.detail
	case r.rule == "":
		d.Rule, d.Error = ReasonBadRequest, "no proxy request"
	default:
		d.Allowed, d.Rule = true, r.rule
	}
	if d.Error == "" {
		d.Error = r.err
	}
	d.Error = redact(d.Error, s.run.Bindings)
	s.g.metrics.observe(d)
	rec, log, unlogged := true, true, int64(0)
	level := slog.LevelDebug
	if !d.Allowed {
		level = slog.LevelInfo
		rec, log, unlogged = s.refusals.note(d, time.Now())
	}
	if log {
		attrs := []slog.Attr{
			slog.String(logKeyRun, d.Run), slog.String(logKeyHost, d.Host), slog.Int(logKeyPort, d.Port),
			slog.String(logKeyAddr, d.Addr), slog.String(logKeyMode, d.Mode), slog.Bool(logKeyAllowed, d.Allowed),
			slog.String(logKeyRule, d.Rule), slog.Int64(logKeyUp, d.BytesUp), slog.Int64(logKeyDown, d.BytesDown),
			slog.String(logKeyError, d.Error),
		}
		if unlogged > 0 {
			attrs = append(attrs, slog.Int64(logKeyUnlogged, unlogged))
		}
		s.g.log.LogAttrs(s.ctx, level, "egress connection", attrs...)
	}
	if rec && s.run.Audit != nil {
		s.run.Audit(d)
	}
}

// countConn counts an upstream connection's bytes into a record.
type countConn struct {
	net.Conn
	rec *record
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rec.down.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.rec.up.Add(int64(n))
	return n, err
}

// CloseWrite half-closes the counted connection where it can.
func (c *countConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
