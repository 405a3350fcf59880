package e2bapi

import (
	"time"

	"github.com/agent-runner/agent-runner/session"
)

// Answers of the control plane, in the shapes of E2B's API (the SDKs
// read these field names).

// baseTemplate is the one template the door offers: the operator's
// default sandbox.
const baseTemplate = "base"

// clientID is the client id E2B reports with every sandbox; agent-runner
// has one server.
const clientID = "agent-runner"

// sandboxJSON answers a create or connect (E2B's Sandbox).
type sandboxJSON struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// listedJSON is a sandbox in a list (E2B's ListedSandbox).
type listedJSON struct {
	TemplateID   string            `json:"templateID"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	CPUCount     int64             `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []struct{}        `json:"volumeMounts"`
}

// detailJSON is one sandbox (E2B's SandboxDetail).
type detailJSON struct {
	listedJSON
	EnvdAccessToken     string        `json:"envdAccessToken"`
	Domain              *string       `json:"domain"`
	AllowInternetAccess bool          `json:"allowInternetAccess"`
	Network             *networkJSON  `json:"network,omitempty"`
	Lifecycle           lifecycleJSON `json:"lifecycle"`
}

// networkJSON is a sandbox's egress as E2B states it: the hosts it may
// reach.
type networkJSON struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
}

// lifecycleJSON is what happens at a sandbox's timeout: it is killed,
// or paused (on_timeout "pause"), then resumed by traffic when
// autoResume.
type lifecycleJSON struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

func (d *Door) sandbox(rec session.Record) sandboxJSON {
	return sandboxJSON{TemplateID: baseTemplate, SandboxID: rec.ID, ClientID: clientID, EnvdVersion: EnvdVersion, EnvdAccessToken: d.accessToken(rec.ID)}
}

func listed(rec session.Record) listedJSON {
	md := rec.Metadata
	if md == nil {
		md = map[string]string{}
	}
	state := "running"
	if rec.State == session.StatePaused {
		state = "paused"
	}
	return listedJSON{
		TemplateID: baseTemplate, SandboxID: rec.ID, ClientID: clientID,
		StartedAt: rec.CreatedAt, EndAt: rec.ExpiresAt,
		CPUCount: rec.Limits.CPUCount, MemoryMB: rec.Limits.MemoryMB,
		Metadata: md, State: state, EnvdVersion: EnvdVersion, VolumeMounts: []struct{}{},
	}
}

func (d *Door) detail(rec session.Record) detailJSON {
	out := detailJSON{listedJSON: listed(rec), EnvdAccessToken: d.accessToken(rec.ID), Lifecycle: lifecycleJSON{OnTimeout: "kill", AutoResume: rec.AutoResume}}
	if rec.OnTimeout == session.OnTimeoutPause {
		out.Lifecycle.OnTimeout = "pause"
	}
	switch rec.Network.Mode {
	case "host":
		out.AllowInternetAccess = true
	case "allowlist":
		out.Network = &networkJSON{AllowOut: rec.Network.AllowedHosts, DenyOut: []string{allTraffic}}
	}
	return out
}
