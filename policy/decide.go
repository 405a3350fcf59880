package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Config is the runner-side part of policy.
type Config struct {
	// SearchPath resolves bare command names (PATH of the runner's choice,
	// never the caller's environment).
	SearchPath []string
	// View, when set, is what the job's sandbox sees of the host (its
	// backend's, see backend.Viewer): bare names resolve on View.Path
	// instead of SearchPath, to programs inside the view only; a program
	// resolved outside it is denied (policy.command_denied, naming the
	// operator's flag); and the child's PATH is View.Path.
	View *backend.View
	// AllowedEnv are keys any request may set without listing them in
	// policy.allowed_env.
	AllowedEnv []string
	// BaseEnv is given to every child (for example PATH, LANG); request env
	// may not override these keys unless they are allowed.
	BaseEnv map[string]string
}

// DefaultSearchPath is used when Config.SearchPath is empty.
var DefaultSearchPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// Decision is an allow decision with everything the pipeline needs to run.
type Decision struct {
	// Argv is the argv to exec; Argv[0] is an absolute host path, or a path
	// relative to the cwd for programs inside the workspace ("./run.sh").
	Argv []string
	Env  []string
	// Executables, under policy.exec_scope every_process, are the only
	// programs the job may execute, as absolute host paths: what every
	// allowed command resolves to, a pinned digest checked on that file
	// (see executables). Nil under exec_scope argv0.
	Executables []string
	// Pinned, under exec_scope every_process, is the file each of
	// Executables whose sha256 the policy checked was when it was hashed
	// (backend.Spec.Pinned).
	Pinned map[string]backend.FileIdentity
	// DeniedPrograms, under allow_shell false, are the program names no
	// process of the job may execute (ShellPrograms), whatever the
	// exec_scope: the backend finds them in its view and refuses them at
	// every exec. Nil with allow_shell.
	DeniedPrograms []string
	Version        string
	Messages       []string
}

// Decide applies req.Policy (and cfg) to req. It returns a *job.Error with a
// policy.* code on denial.
func Decide(req job.Request, cfg Config) (Decision, *job.Error) {
	p := req.Policy
	d := Decision{Version: job.PolicyVersion(p), Messages: []string{}}
	argv := req.Command.Argv
	if len(argv) == 0 {
		return d, job.Errorf(job.CodeInvalidRequest, "command.argv must not be empty")
	}
	if shell, ok := shellIn(argv); ok && !p.AllowShell {
		return d, job.Errorf(job.CodeShellDenied, "shell execution is denied by policy").
			With("argv0", argv[0]).With("shell", shell)
	}
	d.Argv = append([]string(nil), argv...)
	every := p.ExecScope == job.ExecScopeEveryProcess
	var ran []string
	var pinned map[string]backend.FileIdentity
	if every {
		pinned = map[string]backend.FileIdentity{}
	}
	for _, st := range chain(argv) {
		name := st.name
		rule, ok := findRule(p.AllowedCommands, filepath.Base(name))
		if !ok {
			return d, job.Errorf(job.CodeCommandDenied, "command is not allowed by policy").
				With("argv0", name)
		}
		if err := envAssignsAllowed(st.assigns, p, cfg); err != nil {
			return d, err
		}
		if st.applet {
			continue // interpreted by the wrapper (busybox APPLET), not exec'd
		}
		if st.index < 0 {
			if rule.Path != "" || rule.SHA256 != "" {
				return d, job.Errorf(job.CodeCommandDenied, "a pinned command must appear in argv itself, not inside a re-split string").
					With("argv0", name)
			}
			continue
		}
		exe, err := resolve(name, rule, cfg, pinned)
		if err != nil {
			return d, err
		}
		if exe == "" && every {
			return d, job.Errorf(job.CodeCommandDenied, "under exec_scope every_process the job may execute only host programs its allowed_commands resolve to, not one in the workspace").
				With("argv0", name)
		}
		if exe != "" && !p.AllowShell && carriesShell(exe, name, every) {
			real, _ := filepath.EvalSymlinks(exe)
			return d, job.Errorf(job.CodeShellDenied, "shell execution is denied by policy").
				With("argv0", name).With("resolved", real)
		}
		if exe != "" {
			ran = append(ran, exe)
			// Wrapped programs are exec'd by their resolved path too, so a
			// wrapper's own PATH lookup cannot pick another binary.
			d.Argv[st.index] = exe
		}
	}
	env, err := childEnv(req, cfg)
	if err != nil {
		return d, err
	}
	d.Env = env
	if !p.AllowShell {
		d.DeniedPrograms = ShellPrograms()
	}
	if every {
		var msgs []string
		d.Executables, msgs = executables(p, cfg, ran, pinned)
		d.Messages = append(d.Messages, msgs...)
		d.Pinned = pinned
	}
	return d, nil
}

// envAssignsAllowed applies the environment allowlist to NAME=VALUE
// operands of an env wrapper (env LD_PRELOAD=x prog), which set the child's
// environment as much as command.env does.
func envAssignsAllowed(assigns []string, p job.Policy, cfg Config) *job.Error {
	for _, a := range assigns {
		k, _, _ := strings.Cut(a, "=")
		if !slices.Contains(p.AllowedEnv, k) && !slices.Contains(cfg.AllowedEnv, k) {
			return job.Errorf(job.CodeEnvDenied, "environment variable set through env is not allowed by policy").With("key", k)
		}
	}
	return nil
}

func findRule(rules []job.CommandRule, base string) (job.CommandRule, bool) {
	for _, r := range rules {
		if r.Basename == base {
			return r, true
		}
	}
	return job.CommandRule{}, false
}

// resolve finds the executable for name under rule. It returns "" for a
// relative path with a slash, which lives in the workspace snapshot. A
// digest it checks puts the identity of the file hashed in pinned
// (when not nil).
func resolve(name string, rule job.CommandRule, cfg Config, pinned map[string]backend.FileIdentity) (string, *job.Error) {
	var exe string
	switch {
	case rule.Path != "" && (!strings.Contains(name, "/") || filepath.Clean(name) == filepath.Clean(rule.Path)):
		exe = rule.Path
	case rule.Path != "":
		return "", job.Errorf(job.CodeCommandDenied, "command path does not match the pinned path").
			With("argv0", name).With("pinned_path", rule.Path)
	case filepath.IsAbs(name):
		exe = filepath.Clean(name)
	case strings.Contains(name, "/"):
		if rule.SHA256 != "" {
			return "", job.Errorf(job.CodeCommandDenied, "a digest-pinned command must be a host path").With("argv0", name)
		}
		return "", nil
	case cfg.View != nil:
		exe = cfg.View.LookPath(name)
		if exe == "" {
			if host := lookPath(name, cfg.SearchPath); host != "" {
				return "", outsideView(name, host, true, cfg.View)
			}
			return "", job.Errorf(job.CodeRunSpawnFailed, "command not found on the sandbox PATH (%s)", strings.Join(cfg.View.Path, ":")).
				With("argv0", name)
		}
	default:
		exe = lookPath(name, cfg.SearchPath)
		if exe == "" {
			return "", job.Errorf(job.CodeRunSpawnFailed, "command not found on the runner search path").
				With("argv0", name)
		}
	}
	if cfg.View != nil && !cfg.View.Visible(exe) {
		return "", outsideView(name, exe, false, cfg.View)
	}
	if rule.SHA256 != "" && cfg.View != nil && cfg.View.Root != "" {
		// An image's root is the workload's to rewrite (root inside): a
		// digest checked before the run would not hold for the file it
		// executes.
		return "", job.Errorf(job.CodeCommandDenied, "a digest-pinned command cannot be checked in an image, whose files the workload may rewrite").
			With("argv0", name).With("path", exe)
	}
	if rule.SHA256 != "" {
		sum, id, err := fileSHA256(exe)
		if err != nil {
			return "", job.Wrap(job.CodeCommandDenied, err, "pinned command cannot be hashed").With("argv0", name).With("path", exe)
		}
		want := strings.TrimPrefix(strings.ToLower(rule.SHA256), "sha256:")
		if sum != want {
			return "", job.Errorf(job.CodeCommandDenied, "command digest does not match the pinned sha256").
				With("argv0", name).With("path", exe).With("sha256", sum)
		}
		if pinned != nil {
			pinned[exe] = id
		}
	}
	return exe, nil
}

// outsideView denies a program the job's sandbox cannot run as found.
func outsideView(name, exe string, bare bool, v *backend.View) *job.Error {
	return job.Errorf(job.CodeCommandDenied, "command %q: %s", name, v.Explain(exe, bare)).
		With("argv0", name).With("path", exe)
}

func lookPath(name string, search []string) string {
	if len(search) == 0 {
		search = DefaultSearchPath
	}
	for _, dir := range search {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

type digestKey struct {
	path string
	id   backend.FileIdentity
}

var digestCache sync.Map // digestKey -> string

// fileSHA256 hashes an executable and says which file it hashed, caching
// by path and identity (inode, size, mtime, ctime) so repeated jobs do
// not rehash large interpreters. A file that changes while it is hashed
// is an error.
func fileSHA256(path string) (string, backend.FileIdentity, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", backend.FileIdentity{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", backend.FileIdentity{}, err
	}
	id := identity(fi)
	key := digestKey{path: path, id: id}
	if v, ok := digestCache.Load(key); ok {
		return v.(string), id, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", id, err
	}
	if after, err := f.Stat(); err != nil || identity(after) != id {
		return "", id, fmt.Errorf("%s changed while it was hashed", path)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	digestCache.Store(key, sum)
	return sum, id, nil
}

// childEnv builds the child environment: BaseEnv plus request keys that
// policy.allowed_env or cfg.AllowedEnv permit.
func childEnv(req job.Request, cfg Config) ([]string, *job.Error) {
	allowed := map[string]bool{}
	for _, k := range req.Policy.AllowedEnv {
		allowed[k] = true
	}
	for _, k := range cfg.AllowedEnv {
		allowed[k] = true
	}
	env := map[string]string{}
	for k, v := range cfg.BaseEnv {
		env[k] = v
	}
	if cfg.View != nil {
		env["PATH"] = strings.Join(cfg.View.Path, ":")
	}
	keys := make([]string, 0, len(req.Command.Env))
	for k := range req.Command.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !allowed[k] {
			return nil, job.Errorf(job.CodeEnvDenied, "environment variable is not allowed by policy").With("key", k)
		}
		env[k] = req.Command.Env[k]
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}
