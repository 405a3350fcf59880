package egress

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// Binding is a secret bound to the hosts it may be sent to. The sandbox
// sees only Placeholder; on an intercepted connection to a host in Hosts
// the gateway replaces Placeholder with Value in request header values.
// Value is never logged, recorded or put in an error.
type Binding struct {
	Name        string
	Placeholder string
	Value       string
	Hosts       []Rule
}

// Placeholder returns a fresh placeholder for the secret name: random,
// unguessable and recognizable, "agent-runner-placeholder-NAME-<32 hex>".
func Placeholder(name string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "agent-runner-placeholder-" + name + "-" + hex.EncodeToString(b[:])
}

// checkBindings refuses bindings the gateway could not apply safely. The
// errors name the binding, never its value.
func checkBindings(bs []Binding) error {
	for i, b := range bs {
		switch {
		case b.Name == "":
			return job.Errorf(job.CodeInvalidRequest, "egress binding %d has no name", i)
		case len(b.Placeholder) < 16:
			return job.Errorf(job.CodeInvalidRequest, "egress binding %s: placeholder is empty or too short to be unguessable", b.Name)
		case b.Value == "":
			return job.Errorf(job.CodeInvalidRequest, "egress binding %s has an empty value", b.Name)
		case strings.Contains(b.Value, b.Placeholder) || strings.Contains(b.Placeholder, b.Value):
			return job.Errorf(job.CodeInvalidRequest, "egress binding %s: placeholder and value overlap", b.Name)
		case strings.ContainsAny(b.Value, "\r\n\x00"):
			return job.Errorf(job.CodeInvalidRequest, "egress binding %s: value holds a line break or NUL and cannot go in a header", b.Name)
		case len(b.Hosts) == 0:
			return job.Errorf(job.CodeInvalidRequest, "egress binding %s is bound to no host", b.Name)
		}
	}
	return nil
}

// bound returns the bindings whose hosts match host:port.
func bound(bs []Binding, host string, port int) []Binding {
	var out []Binding
	for _, b := range bs {
		for _, r := range b.Hosts {
			if r.Match(host, port) {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

// inject replaces each binding's placeholder with its value in every
// header value of h. Bodies and URLs are left alone.
func inject(h http.Header, bs []Binding) {
	if len(bs) == 0 {
		return
	}
	for _, vs := range h {
		for i, v := range vs {
			for _, b := range bs {
				if strings.Contains(v, b.Placeholder) {
					v = strings.ReplaceAll(v, b.Placeholder, b.Value)
				}
			}
			vs[i] = v
		}
	}
}

// redact replaces any secret value in s with its binding's name, so that
// an error text that echoes upstream bytes cannot carry a value into a
// record or a log.
func redact(s string, bs []Binding) string {
	for _, b := range bs {
		if strings.Contains(s, b.Value) {
			s = strings.ReplaceAll(s, b.Value, "[redacted "+b.Name+"]")
		}
	}
	return s
}
