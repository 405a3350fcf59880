package main

import (
	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/door/e2bapi"
	"github.com/agent-runner/agent-runner/session"
)

// mountE2B mounts the E2B-compatible API under prefix (--e2b-prefix;
// empty: not mounted) over sessions (docs/e2b.md): its control plane
// authenticated by X-API-Key, a token of tokens (serve's --token-file,
// nil without one) with the sessions scope; its in-sandbox API by each
// sandbox's access token. serve's guard still holds Host and Origin;
// tokens and body types under the prefix are the door's.
func mountE2B(d serveDeps, prefix string, tokens *auth.Tokens, sessions *session.Service) {
	if prefix == "" {
		return
	}
	door := e2bapi.New(e2bapi.Config{Sessions: sessions, Tokens: tokens, Prefix: prefix, Internet: e2bInternet(d), Logger: d.Logger.WithGroup("e2b")})
	d.AuthenticatesItself(door.Prefix())
	d.Mux.Handle(door.Prefix()+"/", door)
}

// e2bInternet is what an E2B sandbox asking for the internet gets: the
// host network with --allow-host-network, else an allow-list of the
// whole egress ceiling (--egress-allow), else nothing (refused).
func e2bInternet(d serveDeps) *session.Network {
	cfg := d.Runner.Config()
	switch {
	case cfg.AllowHostNetwork:
		return &session.Network{Mode: "host"}
	case cfg.Egress != nil && len(cfg.Egress.Ceiling) > 0:
		hosts := make([]string, len(cfg.Egress.Ceiling))
		for i, r := range cfg.Egress.Ceiling {
			hosts[i] = r.String()
		}
		return &session.Network{Mode: "allowlist", AllowedHosts: hosts}
	}
	return nil
}
