// Package validation checks a decoded RunJobRequest before any work starts
// and fills in defaults: shape, paths (cwd inside the snapshot, no escapes,
// no odd bytes; read-only mounts inside the workspace; cache names and
// mount points), glob syntax, limits within the runner's maxima, and a
// known backend kind. Errors are *job.Error with validation.* codes.
package validation

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safepath"
	"github.com/agent-runner/agent-runner/store"
)

// Config carries the runner-configured defaults and maxima.
type Config struct {
	Defaults job.Limits
	Max      job.Limits
	// DefaultBackend is used when backend.kind is empty.
	DefaultBackend string
	// KnownBackend reports whether a backend kind is registered.
	KnownBackend func(kind string) bool
}

// NormalizeKind maps the CLI spelling ("local-process") to the contract
// spelling ("local_process").
func NormalizeKind(kind string) string { return strings.ReplaceAll(kind, "-", "_") }

// Request validates req in place, filling defaults. It returns the first
// problem found.
func Request(req *job.Request, cfg Config) error {
	if req.JobID != "" && !store.ValidJobID(req.JobID) {
		return job.Errorf(job.CodeInvalidRequest, "job_id must match [A-Za-z0-9][A-Za-z0-9_.-]{0,127}").With("field", "job_id")
	}
	if err := workspace(&req.Workspace); err != nil {
		return err
	}
	if err := command(&req.Command); err != nil {
		return err
	}
	if err := policy(&req.Policy); err != nil {
		return err
	}
	if err := limits(&req.Limits, cfg); err != nil {
		return err
	}
	switch req.OnInterrupt {
	case "", "retry", "fail":
	default:
		return invalid("on_interrupt", "must be \"retry\" or \"fail\"")
	}
	req.Backend.Kind = NormalizeKind(req.Backend.Kind)
	if req.Backend.Kind == "" {
		req.Backend.Kind = cfg.DefaultBackend
	}
	if cfg.KnownBackend != nil && !cfg.KnownBackend(req.Backend.Kind) {
		return invalid("backend.kind", "unknown backend kind").With("kind", req.Backend.Kind)
	}
	switch {
	case req.Backend.Runtime != "" && req.Backend.Kind != "oci":
		return invalid("backend.runtime", "only the oci backend takes a runtime").With("kind", req.Backend.Kind)
	case req.Backend.Runtime != "" && req.Backend.Runtime != "runc" && req.Backend.Runtime != "runsc":
		return invalid("backend.runtime", "must be \"runc\" or \"runsc\"")
	}
	return nil
}

func invalid(field, msg string) *job.Error {
	return job.Errorf(job.CodeInvalidRequest, "%s: %s", field, msg).With("field", field)
}

func escape(field, value string, err error) *job.Error {
	return job.Errorf(job.CodePathEscape, "%s: %v", field, err).With("field", field).With("path", value)
}

func workspace(w *job.Workspace) error {
	switch w.Source {
	case "":
		w.Source = "local_path"
	case "local_path":
	default:
		return invalid("workspace.source", "only \"local_path\" is supported")
	}
	if w.Path == "" {
		return invalid("workspace.path", "is required")
	}
	if strings.ContainsRune(w.Path, 0) {
		return escape("workspace.path", w.Path, safepath.ErrOddByte)
	}
	abs, err := filepath.Abs(w.Path)
	if err != nil {
		return invalid("workspace.path", err.Error())
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return invalid("workspace.path", "must be an existing directory").With("path", w.Path)
	}
	// The snapshot walk never follows symlinks, the root included: a path
	// that is (or passes through) a link is resolved here, once.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return invalid("workspace.path", "cannot be resolved").With("path", w.Path)
	}
	w.Path = real
	switch w.SnapshotStrategy {
	case "":
		w.SnapshotStrategy = job.SnapshotCopy
	case job.SnapshotCopy, job.SnapshotOverlay:
	default:
		return invalid("workspace.snapshot_strategy", "must be \"copy\" or \"overlay\"")
	}
	if err := globs("workspace.include", w.Include); err != nil {
		return err
	}
	if err := globs("workspace.exclude", w.Exclude); err != nil {
		return err
	}
	if err := readOnlyMounts(w); err != nil {
		return err
	}
	return caches(w.Caches)
}

func command(c *job.Command) error {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return invalid("command.argv", "must be a non-empty array with a non-empty program")
	}
	for _, a := range c.Argv {
		if strings.ContainsRune(a, 0) {
			return invalid("command.argv", "arguments must not contain NUL bytes")
		}
	}
	if c.Cwd == "" {
		c.Cwd = "."
	}
	cwd, err := safepath.Clean(c.Cwd)
	if err != nil {
		return escape("command.cwd", c.Cwd, err)
	}
	c.Cwd = cwd
	for k, v := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return invalid("command.env", "keys must be non-empty without '=' or NUL, values without NUL").With("key", k)
		}
	}
	return nil
}

func policy(p *job.Policy) error {
	for _, r := range p.AllowedCommands {
		if r.Basename == "" || strings.Contains(r.Basename, "/") {
			return invalid("policy.allowed_commands", "each entry needs a basename without '/'")
		}
		if r.Path != "" && !filepath.IsAbs(r.Path) {
			return invalid("policy.allowed_commands", "a pinned path must be absolute").With("path", r.Path)
		}
		if r.SHA256 != "" {
			h := strings.TrimPrefix(strings.ToLower(r.SHA256), "sha256:")
			if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
				return invalid("policy.allowed_commands", "sha256 must be 64 hex digits")
			}
		}
	}
	for _, k := range p.AllowedEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalid("policy.allowed_env", "keys must be non-empty without '=' or NUL")
		}
	}
	switch p.Network {
	case "":
		p.Network = job.NetworkDisabled
	case job.NetworkDisabled, job.NetworkAllowlist, job.NetworkHost:
	default:
		return invalid("policy.network", "must be \"disabled\", \"allowlist\" or \"host\"")
	}
	switch {
	case p.Network == job.NetworkAllowlist && len(p.AllowedHosts) == 0:
		return invalid("policy.allowed_hosts", "network \"allowlist\" needs at least one host")
	case p.Network != job.NetworkAllowlist && len(p.AllowedHosts) > 0:
		return invalid("policy.allowed_hosts", "only applies with network \"allowlist\"")
	case len(p.AllowedHosts) > 256:
		return invalid("policy.allowed_hosts", "at most 256 hosts")
	}
	switch p.WritePolicy {
	case "":
		p.WritePolicy = "workspace_only"
	case "workspace_only":
	default:
		return invalid("policy.write_policy", "must be \"workspace_only\"")
	}
	if err := execScope(p); err != nil {
		return err
	}
	if err := artifactGlobs("policy.artifact_globs", p.ArtifactGlobs); err != nil {
		return err
	}
	return artifactGlobs("policy.artifact_deny_globs", p.ArtifactDenyGlobs)
}

func globs(field string, patterns []string) error {
	for _, g := range patterns {
		if g == "" || !doublestar.ValidatePattern(g) {
			return invalid(field, "invalid glob pattern").With("pattern", g)
		}
	}
	return nil
}

// artifactGlobs must also stay inside the snapshot.
func artifactGlobs(field string, patterns []string) error {
	if err := globs(field, patterns); err != nil {
		return err
	}
	for _, g := range patterns {
		if _, err := safepath.Clean(g); err != nil {
			return escape(field, g, err)
		}
	}
	return nil
}
