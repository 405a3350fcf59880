package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/session"
)

// loadSandboxTemplates reads serve's --sandbox-templates: a JSON or YAML
// object of template name -> session.Template (backend, limits, policy,
// network, env, timeout_s, pool). Unknown fields are refused; each
// template's policy is held to a request's rules, and the session
// service admits each one against the operator's settings when it
// starts (docs/sessions.md "Templates and warm pools").
func loadSandboxTemplates(path string) (map[string]session.Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-templates: %w", err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("--sandbox-templates %s: not JSON or YAML: %w", path, err)
	}
	asJSON, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-templates %s: not an object of templates: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(asJSON))
	dec.DisallowUnknownFields()
	var ts map[string]session.Template
	if err := dec.Decode(&ts); err != nil {
		return nil, fmt.Errorf("--sandbox-templates %s: not an object of templates: %w", path, err)
	}
	for name, t := range ts {
		if t.Policy == nil {
			continue
		}
		if err := checkPolicy(*t.Policy); err != nil {
			return nil, fmt.Errorf("--sandbox-templates %s: template %s: %w", path, name, err)
		}
	}
	return ts, nil
}

// poolWait bounds how long serve waits for its warm pools before it
// answers.
const poolWait = 2 * time.Minute

// waitPools waits until the sandbox templates' warm pools are full (so
// the first creates are warm), at most poolWait: a pooled sandbox that
// cannot be created is logged and serve goes on (those creates start
// cold).
func waitPools(ctx context.Context, s *session.Service, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, poolWait)
	defer cancel()
	if err := s.WaitPools(ctx); err != nil {
		log.Warn("the sandbox pools are not full; creates start cold until they are", "error", err)
	}
}
