package e2bapi

import (
	"encoding/json"
	"slices"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// createBody is POST /sandboxes and /v2/sandboxes. Fields E2B offers and
// this server does not are refused by name (never ignored); fields it
// does not know at all are refused by the decoder.
type createBody struct {
	TemplateID      string            `json:"templateID"`
	Timeout         *int64            `json:"timeout"`
	Metadata        map[string]string `json:"metadata"`
	EnvVars         map[string]string `json:"envVars"`
	AutoPause       *bool             `json:"autoPause"`
	AutoPauseMemory *bool             `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	AllowInternetAccess *bool        `json:"allow_internet_access"`
	Network             *networkBody `json:"network"`
	// Secure false asks for an envd without access token: every
	// sandbox here has one, and the SDKs send the token a create
	// answers, so it is answered as true.
	Secure       *bool           `json:"secure"`
	MCP          json.RawMessage `json:"mcp"`
	IAM          json.RawMessage `json:"iam"`
	VolumeMounts json.RawMessage `json:"volumeMounts"`
}

// networkBody is a create's network: allowOut, with denyOut naming all
// other traffic, is an allow-list through the egress gateway.
type networkBody struct {
	AllowOut           []string        `json:"allowOut"`
	DenyOut            []string        `json:"denyOut"`
	Rules              json.RawMessage `json:"rules"`
	EgressProxy        json.RawMessage `json:"egressProxy"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
	MaskRequestHost    json.RawMessage `json:"maskRequestHost"`
	HTTPSPorts         json.RawMessage `json:"httpsPorts"`
}

// allTraffic is E2B's name for every address (ALL_TRAFFIC).
const allTraffic = "0.0.0.0/0"

// given reports whether a raw field holds a value.
func given(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// sessionRequest translates a create into the session service's, or
// says what of it is not supported; internet is the network that
// allow_internet_access true gets (Config.Internet), defined whether the
// operator defined a sandbox template of that name (Service.HasTemplate).
// autoPause (lifecycle onTimeout 'pause') is on_timeout "pause" and
// autoResume auto_resume (the session service refuses it without
// autoPause). templateID names the operator's template of the same name
// (--sandbox-templates: its limits, policy, network, env and warm pool);
// "base", the SDK's default, is the operator's default sandbox unless a
// template named base is defined; any other id is not found.
func sessionRequest(b createBody, internet *session.Network, defined func(string) bool) (session.CreateRequest, error) {
	req := session.CreateRequest{Metadata: b.Metadata}
	if len(b.EnvVars) > 0 {
		req.Env = b.EnvVars
	}
	switch {
	case b.TemplateID != "" && defined(b.TemplateID):
		req.Template = b.TemplateID
	case b.TemplateID == "", b.TemplateID == baseTemplate:
	default:
		return req, job.Errorf(job.CodeJobNotFound, "template %q not found: this server offers template %q (its default sandbox) and the operator's templates (--sandbox-templates)", b.TemplateID, baseTemplate).With("templateID", b.TemplateID)
	}
	if b.Timeout != nil {
		if *b.Timeout <= 0 {
			return req, job.Errorf(job.CodeInvalidRequest, "timeout must be a positive number of seconds").With("field", "timeout")
		}
		req.TimeoutS = *b.Timeout
	}
	if b.AutoPause != nil && *b.AutoPause {
		req.OnTimeout = session.OnTimeoutPause
	}
	if b.AutoResume != nil && b.AutoResume.Enabled {
		req.AutoResume = true
	}
	switch {
	case b.AutoPauseMemory != nil && !*b.AutoPauseMemory:
		return req, notSupported("autoPauseMemory false (onTimeout keepMemory: false, a filesystem-only snapshot; a paused sandbox keeps its memory)")
	case given(b.MCP):
		return req, notSupported("mcp (the MCP gateway template)")
	case given(b.IAM):
		return req, notSupported("iam tokens")
	case given(b.VolumeMounts):
		return req, notSupported("volumeMounts")
	}
	net, err := network(b.AllowInternetAccess, b.Network, internet)
	req.Network = net
	return req, err
}

// network maps E2B's internet access and network rules onto the egress
// vocabulary: allowOut is an allow-list (the gateway's, within the
// operator's ceiling), allow_internet_access true the operator's
// internet (internet: nil refuses it), false or unset no network but
// loopback.
func network(allowInternet *bool, n *networkBody, internet *session.Network) (*session.Network, error) {
	if n != nil {
		switch {
		case given(n.Rules):
			return nil, notSupported("network.rules (request transforms)")
		case given(n.EgressProxy):
			return nil, notSupported("network.egressProxy")
		case n.AllowPublicTraffic != nil:
			return nil, notSupported("network.allowPublicTraffic (public sandbox URLs)")
		case given(n.MaskRequestHost):
			return nil, notSupported("network.maskRequestHost")
		case given(n.HTTPSPorts):
			return nil, notSupported("network.httpsPorts")
		}
		for _, d := range n.DenyOut {
			if d != allTraffic {
				return nil, notSupported("network.denyOut other than " + allTraffic + " (a deny-list; name what the sandbox may reach in allowOut)")
			}
		}
		if len(n.AllowOut) > 0 {
			if allowInternet != nil && *allowInternet && !slices.Contains(n.DenyOut, allTraffic) {
				return nil, notSupported("allowOut with allow_internet_access true (an allow-list denies all other traffic)")
			}
			return &session.Network{Mode: "allowlist", AllowedHosts: n.AllowOut}, nil
		}
		if len(n.DenyOut) > 0 {
			return &session.Network{Mode: "disabled"}, nil
		}
	}
	if allowInternet != nil && *allowInternet {
		if internet == nil {
			return nil, job.Errorf(job.CodeNetworkDenied, "allow_internet_access: this server gives sandboxes no internet (the operator's --allow-host-network or --egress-allow); create with allowInternetAccess false, or name hosts in network.allowOut").With("field", "allow_internet_access")
		}
		return internet, nil
	}
	return &session.Network{Mode: "disabled"}, nil
}
