package egress

import (
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// Operator is the operator's side of egress: the gateway and the ceiling
// of hosts any request may reach (--egress-allow). Requests only narrow
// it.
type Operator struct {
	Gateway *Gateway
	Ceiling []Rule
}

// Narrow checks that every rule a request names lies within the ceiling.
// A nil Operator, or one without a ceiling, allows nothing. The error is
// policy.network_denied naming the rules outside, with field (the
// request's field) in its details.
func (o *Operator) Narrow(req []Rule, field string) error {
	if o == nil || o.Gateway == nil || len(o.Ceiling) == 0 {
		return job.Errorf(job.CodeNetworkDenied, "%s: this runner has no egress ceiling (the operator's --egress-allow HOST), so nothing may be reached", field).
			With("field", field)
	}
	outside := Within(req, o.Ceiling)
	if len(outside) == 0 {
		return nil
	}
	names := make([]string, len(outside))
	for i, r := range outside {
		names[i] = r.String()
	}
	return job.Errorf(job.CodeNetworkDenied, "%s reach beyond the operator's egress ceiling: %s", field, strings.Join(names, ", ")).
		With("field", field).With("outside", names)
}
