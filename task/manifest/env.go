package manifest

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Bounds of agent.env.
const (
	MaxEnvVars       = 128
	MaxEnvValueBytes = 32 << 10
)

// ReservedEnv are the variables the runner sets for every task (PATH,
// HOME, LANG, TASK_ID; AGENT_TASK_TOKEN; AGENT_RUNNER_SOCKET and any other
// AGENT_RUNNER_ name): agent.env may not set them.
var ReservedEnv = []string{"PATH", "HOME", "LANG", "TASK_ID", "AGENT_TASK_TOKEN"}

// ReservedEnvPrefix is reserved for the runner's variables.
const ReservedEnvPrefix = "AGENT_RUNNER_"

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateEnv checks agent.env as a job's command.env is checked (no NUL,
// no '=' in a name), with names that are variable names, none reserved or
// naming one of the task's secrets (whose value would be ambiguous), at
// most MaxEnvVars of them and values of at most MaxEnvValueBytes.
func validateEnv(env map[string]string, secrets []Secret) error {
	if len(env) > MaxEnvVars {
		return invalid("agent.env", "at most %d variables", MaxEnvVars)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		field := "agent.env." + k
		switch {
		case !envName.MatchString(k):
			return invalid("agent.env", "%q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", k).With("key", k)
		case slices.Contains(ReservedEnv, k) || strings.HasPrefix(k, ReservedEnvPrefix):
			return invalid(field, "%s is set by the runner and cannot be changed", k).With("key", k)
		case slices.ContainsFunc(secrets, func(s Secret) bool { return s.Name == k }):
			return invalid(field, "%s is also a secret of this task; give it once, as a secret", k).With("key", k)
		case strings.ContainsRune(v, 0):
			return invalid(field, "values must not contain NUL bytes").With("key", k)
		case len(v) > MaxEnvValueBytes:
			return invalid(field, "a value is at most %d bytes", MaxEnvValueBytes).With("key", k)
		}
	}
	return nil
}
