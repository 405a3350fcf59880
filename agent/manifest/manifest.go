// Package manifest loads agent manifests (YAML, or JSON by extension) and
// compiles them into the Policy the tool gateway uses for every decision.
// Role text is descriptive only: it never grants a capability.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/job"
)

// Manifest is an agent manifest as written by a person.
type Manifest struct {
	Name         string       `json:"name" yaml:"name"`
	Description  string       `json:"description,omitempty" yaml:"description"`
	Role         Role         `json:"role" yaml:"role"`
	Capabilities Capabilities `json:"capabilities" yaml:"capabilities"`
	Limits       Limits       `json:"limits" yaml:"limits"`
	Output       Output       `json:"output" yaml:"output"`
}

// Role is informational: mission and non-goals. It grants nothing.
type Role struct {
	Mission  string   `json:"mission,omitempty" yaml:"mission"`
	NonGoals []string `json:"non_goals,omitempty" yaml:"non_goals"`
}

// Capabilities are the authoritative grants.
type Capabilities struct {
	Tools      []string   `json:"tools" yaml:"tools"`
	Filesystem Filesystem `json:"filesystem" yaml:"filesystem"`
	Commands   Commands   `json:"commands" yaml:"commands"`
	Network    bool       `json:"network" yaml:"network"`
	// NetworkHosts (an agent-runner extension) narrows network to these
	// hosts, reached through the egress gateway ("allowlist", within the
	// operator's ceiling); network: true without it is the host's network,
	// which the operator must enable (docs/egress.md).
	NetworkHosts []string `json:"network_hosts,omitempty" yaml:"network_hosts"`
	Git          bool     `json:"git" yaml:"git"`
}

// Filesystem lists the read and write roots (relative to the base
// directory, normally the process working directory, or absolute).
type Filesystem struct {
	Read  []string `json:"read" yaml:"read"`
	Write []string `json:"write" yaml:"write"`
}

// Commands lists the exact executables (absolute paths) subprocess tools
// may run.
type Commands struct {
	Allow []string `json:"allow" yaml:"allow"`
}

// Limits are optional; an absent limit gets the documented default.
type Limits struct {
	MaxRuntimeSeconds *int64 `json:"max_runtime_seconds,omitempty" yaml:"max_runtime_seconds"`
	MaxMemoryMB       *int64 `json:"max_memory_mb,omitempty" yaml:"max_memory_mb"`
	MaxToolCalls      *int64 `json:"max_tool_calls,omitempty" yaml:"max_tool_calls"`
}

// Output is a declarative hint for the final answer.
type Output struct {
	Format string         `json:"format,omitempty" yaml:"format"`
	Schema map[string]any `json:"schema,omitempty" yaml:"schema"`
}

// MaxManifestBytes bounds a manifest file.
const MaxManifestBytes = 1 << 20

// Load reads a manifest file: JSON when the extension is .json, YAML
// otherwise. Errors are validation.invalid_request.
func Load(path string) (*Manifest, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read manifest").With("path", path)
	}
	var m *Manifest
	if strings.EqualFold(filepath.Ext(path), ".json") {
		m, err = ParseJSON(data)
	} else {
		m, err = ParseYAML(data)
	}
	if err != nil {
		return nil, nil, err
	}
	return m, data, nil
}

// ParseYAML parses a YAML manifest strictly: unknown fields are errors.
func ParseYAML(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, invalid("manifest", "manifest is larger than %d bytes", MaxManifestBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "manifest is not valid YAML for an agent manifest")
	}
	return &m, nil
}

// ParseJSON parses a JSON manifest strictly: unknown fields and trailing
// data are errors.
func ParseJSON(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, invalid("manifest", "manifest is larger than %d bytes", MaxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "manifest is not valid JSON for an agent manifest")
	}
	if dec.More() {
		return nil, invalid("manifest", "manifest has trailing data after the JSON object")
	}
	return &m, nil
}

func invalid(field, format string, args ...any) *job.Error {
	return job.Errorf(job.CodeInvalidRequest, "%s: %s", field, fmt.Sprintf(format, args...)).With("field", field)
}
