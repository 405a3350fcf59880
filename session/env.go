package session

import (
	"maps"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// A sandbox's env (CreateRequest.Env) is the default environment of
// every process started in it: an exec's or a process's own env
// overrides it key by key. Its secrets' placeholders (secrets.go) come
// after it. The merged env is the run's command.env, so the policy the
// run is decided under (the sandbox's own, else the operator's) must
// allow every key of it: a create whose env or secrets the policy does
// not allow is refused at once, policy.env_denied, rather than at every
// exec.

// defaultEnv is h's (locked) default environment: its env, then its
// secrets' placeholders.
func (h *handle) defaultEnv() map[string]string {
	return mergeEnv(h.rec.Env, h.secretEnv)
}

// mergeEnv is base with over's keys set over it; nil when both are
// empty.
func mergeEnv(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// checkEnv refuses a create's env whose keys are malformed, and env
// keys or secret names that the policy its execs run under (own, else
// the operator's; none: each exec's own env is allowed) does not allow.
func (s *Service) checkEnv(env map[string]string, secrets []string, own *job.Policy) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return job.Errorf(job.CodeInvalidRequest, "env keys must be non-empty without '=' or NUL, values without NUL").With("field", "env").With("key", k)
		}
	}
	p := own
	if p == nil {
		p = s.cfg.Policy
	}
	if p == nil {
		return nil
	}
	allowed := slices.Concat(p.AllowedEnv, s.cfg.Runner.Config().Policy.AllowedEnv)
	for _, k := range slices.Concat(slices.Sorted(maps.Keys(env)), secrets) {
		if !slices.Contains(allowed, k) {
			return job.Errorf(job.CodeEnvDenied, "the sandbox's policy does not allow the environment variable %s (policy.allowed_env)", k).With("field", "env").With("key", k)
		}
	}
	return nil
}
