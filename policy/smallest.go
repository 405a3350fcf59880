package policy

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// maxDerive bounds Smallest's rounds (Decide follows at most
// 32 wrappers).
const maxDerive = 40

// Smallest is the smallest policy under which argv runs with env: the
// policy of a task, or of a session's exec, when the operator gave none,
// so each runs as an unconfined command would. It allows the shell, every
// variable of env, and each program the command line executes (argv[0],
// then what wrappers such as env or timeout run), found by asking
// Decide on b's view until it denies nothing more; a denial it
// cannot lift (a program outside the sandbox's view) is left for the
// step's own decision to record.
func Smallest(argv []string, env []string, b backend.Backend) job.Policy {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	p := job.Policy{AllowShell: true, AllowedEnv: slices.Sorted(maps.Keys(vars))}
	var cfg Config
	if v, ok := b.(backend.Viewer); ok {
		view := v.View()
		cfg.View = &view
	}
	req := job.Request{Command: job.Command{Argv: argv, Env: vars}}
	for range maxDerive {
		req.Policy = p
		_, err := Decide(req, cfg)
		if err == nil {
			return p
		}
		name, _ := err.Details["argv0"].(string)
		key, _ := err.Details["key"].(string)
		switch {
		case err.Code == job.CodeCommandDenied && name != "" && !slices.ContainsFunc(p.AllowedCommands, func(r job.CommandRule) bool { return r.Basename == filepath.Base(name) }):
			p.AllowedCommands = append(p.AllowedCommands, job.CommandRule{Basename: filepath.Base(name)})
		case err.Code == job.CodeEnvDenied && key != "" && !slices.Contains(p.AllowedEnv, key):
			p.AllowedEnv = append(p.AllowedEnv, key)
		default:
			return p
		}
	}
	return p
}
