package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/validation"
)

// loadTaskPolicy reads --task-policy: one job policy, in JSON or in YAML
// with the same field names, checked as a request's policy is. It holds
// what a task may execute (allowed_commands, allow_shell, exec_scope)
// and which of agent.env it may set (allowed_env). A task's network comes
// from its vm.network_mode and the operator's network flags, and its
// artifacts from lifecycle.artifact_patterns, so the policy may not set
// those fields.
func loadTaskPolicy(path string) (*job.Policy, error) {
	p, err := decodePolicyFile("--task-policy", path)
	if err != nil {
		return nil, err
	}
	switch {
	case p.Network != "" || len(p.AllowedHosts) > 0:
		return nil, fmt.Errorf("--task-policy %s: network and allowed_hosts come from each task's vm.network_mode and the operator's network flags, not from the task policy", path)
	case p.WritePolicy != "" || len(p.ArtifactGlobs) > 0 || len(p.ArtifactDenyGlobs) > 0:
		return nil, fmt.Errorf("--task-policy %s: write_policy and artifact globs do not apply to tasks (lifecycle.artifact_patterns names their artifacts)", path)
	}
	if err := checkPolicy(p); err != nil {
		return nil, fmt.Errorf("--task-policy %s: %w", path, err)
	}
	return &p, nil
}

// decodePolicyFile reads the policy file of flag: one job policy, in
// JSON or in YAML with the same field names, no unknown field.
func decodePolicyFile(flag, path string) (job.Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return job.Policy{}, fmt.Errorf("%s: %w", flag, err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return job.Policy{}, fmt.Errorf("%s %s: not JSON or YAML: %w", flag, path, err)
	}
	asJSON, err := json.Marshal(doc)
	if err != nil {
		return job.Policy{}, fmt.Errorf("%s %s: not a policy object: %w", flag, path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(asJSON))
	dec.DisallowUnknownFields()
	var p job.Policy
	if err := dec.Decode(&p); err != nil {
		return job.Policy{}, fmt.Errorf("%s %s: not a job policy: %w", flag, path, err)
	}
	return p, nil
}

// checkPolicy holds p to the rules of a request's policy, on a request
// that is valid otherwise.
func checkPolicy(p job.Policy) error {
	probe := job.Request{Workspace: job.Workspace{Path: os.TempDir()}, Command: job.Command{Argv: []string{"true"}}, Policy: p}
	return validation.Request(&probe, validation.Config{})
}

// loadSandboxPolicy reads --sandbox-policy: the operator's session
// policy (a job policy in JSON or YAML), what an exec in a kept sandbox
// created without a policy of its own runs under. It takes what a
// sandbox's own policy may set (session.CheckPolicy).
func loadSandboxPolicy(path string) (*job.Policy, error) {
	p, err := decodePolicyFile("--sandbox-policy", path)
	if err != nil {
		return nil, err
	}
	if err := session.CheckPolicy(&p); err != nil {
		return nil, fmt.Errorf("--sandbox-policy %s: %w", path, err)
	}
	if err := checkPolicy(p); err != nil {
		return nil, fmt.Errorf("--sandbox-policy %s: %w", path, err)
	}
	return &p, nil
}
