package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

func req(argv []string, rules ...job.CommandRule) job.Request {
	return job.Request{Command: job.Command{Argv: argv}, Policy: job.Policy{AllowedCommands: rules}}
}

func names(ns ...string) []job.CommandRule {
	var rs []job.CommandRule
	for _, n := range ns {
		rs = append(rs, job.CommandRule{Basename: n})
	}
	return rs
}

func TestDecideCommands(t *testing.T) {
	tests := []struct {
		name  string
		req   job.Request
		want  job.Code
		argv0 string
	}{
		{"allowed basename", req([]string{"true"}, names("true")...), "", "/usr/bin/true"},
		{"absolute path allowed by basename", req([]string{"/bin/true"}, names("true")...), "", "/bin/true"},
		{"not on allowlist", req([]string{"curl", "x"}, names("true")...), job.CodeCommandDenied, ""},
		{"empty allowlist allows nothing", req([]string{"true"}), job.CodeCommandDenied, ""},
		{"not found on search path", req([]string{"no-such-program-xyz"}, names("no-such-program-xyz")...), job.CodeRunSpawnFailed, ""},
		{"wrapper and wrapped both needed", req([]string{"timeout", "5", "curl"}, names("timeout")...), job.CodeCommandDenied, ""},
		{"wrapper and wrapped allowed", req([]string{"timeout", "5", "true"}, names("timeout", "true")...), "", "/usr/bin/timeout"},
		{"pinned path used for bare name", req([]string{"python"}, job.CommandRule{Basename: "python", Path: "/bin/true"}), "", "/bin/true"},
		{"pinned path mismatch", req([]string{"/usr/bin/env"}, job.CommandRule{Basename: "env", Path: "/bin/true"}), job.CodeCommandDenied, ""},
		{"relative program in workspace", req([]string{"./run.sh"}, names("run.sh")...), "", "./run.sh"},
		{"digest pin on workspace program", req([]string{"./tool"}, job.CommandRule{Basename: "tool", SHA256: "00"}), job.CodeCommandDenied, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decide(tt.req, Config{})
			if got := codeOf(err); got != tt.want {
				t.Fatalf("Decide(%q) code = %q (%v), want %q", tt.req.Command.Argv, got, err, tt.want)
			}
			if err == nil && d.Argv[0] != tt.argv0 {
				t.Errorf("Decide(%q) argv0 = %q, want %q", tt.req.Command.Argv, d.Argv[0], tt.argv0)
			}
			if d.Version != job.PolicyVersion(tt.req.Policy) {
				t.Errorf("policy version = %q, want the canonical hash", d.Version)
			}
		})
	}
}

func codeOf(err *job.Error) job.Code {
	if err == nil {
		return ""
	}
	return err.Code
}

func TestDecideDigest(t *testing.T) {
	sum, _, err := fileSHA256("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	good := req([]string{"true"}, job.CommandRule{Basename: "true", Path: "/bin/true", SHA256: sum})
	if _, err := Decide(good, Config{}); err != nil {
		t.Errorf("matching digest denied: %v", err)
	}
	prefixed := req([]string{"true"}, job.CommandRule{Basename: "true", Path: "/bin/true", SHA256: "sha256:" + sum})
	if _, err := Decide(prefixed, Config{}); err != nil {
		t.Errorf("sha256:-prefixed digest denied: %v", err)
	}
	bad := req([]string{"true"}, job.CommandRule{Basename: "true", Path: "/bin/true", SHA256: "0000000000000000000000000000000000000000000000000000000000000000"})
	_, derr := Decide(bad, Config{})
	if codeOf(derr) != job.CodeCommandDenied || derr.Details["sha256"] != sum {
		t.Errorf("wrong digest = %v, want command_denied with the actual digest", derr)
	}
}

func TestDecideShells(t *testing.T) {
	all := names("sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "env", "xargs", "nice", "timeout", "nohup", "stdbuf", "setsid", "watch", "python3", "true")
	tests := [][]string{
		{"sh", "-c", "echo hi"},
		{"/bin/bash", "-c", "id"},
		{"dash"}, {"zsh"}, {"ksh"}, {"fish"},
		{"busybox", "sh", "-c", "id"},
		{"env", "sh", "-c", "id"},
		{"env", "FOO=1", "bash"},
		{"env", "-i", "bash"},
		{"env", "-S", "sh -c id"},
		{"xargs", "sh", "-c", "id"},
		{"nice", "-n", "5", "bash"},
		{"timeout", "5", "sh", "-c", "id"},
		{"timeout", "-s", "KILL", "5", "dash"},
		{"nohup", "bash"},
		{"stdbuf", "-oL", "sh"},
		{"setsid", "bash"},
		{"nice", "timeout", "5", "env", "sh"},
		{"watch", "id"},
	}
	for _, argv := range tests {
		_, err := Decide(req(argv, all...), Config{})
		if codeOf(err) != job.CodeShellDenied {
			t.Errorf("Decide(%q) = %v, want %s", argv, err, job.CodeShellDenied)
		}
	}
	// allow_shell lifts the ban; the allowlist still applies.
	r := req([]string{"sh", "-c", "true"}, names("sh")...)
	r.Policy.AllowShell = true
	if _, err := Decide(r, Config{}); err != nil {
		t.Errorf("allow_shell with sh allowed: %v", err)
	}
	r = req([]string{"bash", "-c", "true"})
	r.Policy.AllowShell = true
	if _, err := Decide(r, Config{}); codeOf(err) != job.CodeCommandDenied {
		t.Errorf("allow_shell without bash on the allowlist = %v, want command_denied", err)
	}
	// Non-shell programs with shell-like arguments are fine.
	if _, err := Decide(req([]string{"python3", "-c", "print('sh')"}, all...), Config{}); err != nil {
		t.Errorf("python3 -c: %v", err)
	}
}

func TestDecideShellBehindAllowedName(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "python")
	if err := os.Symlink("/bin/bash", link); err != nil {
		t.Fatal(err)
	}
	_, err := Decide(req([]string{"python"}, names("python")...), Config{SearchPath: []string{dir}})
	if codeOf(err) != job.CodeShellDenied {
		t.Errorf("symlink python -> bash = %v, want shell_denied", err)
	}
}

func TestDecideEnv(t *testing.T) {
	base := map[string]string{"PATH": "/usr/bin:/bin"}
	tests := []struct {
		name    string
		env     map[string]string
		allowed []string
		runner  []string
		want    []string
		code    job.Code
	}{
		{"no env", nil, nil, nil, []string{"PATH=/usr/bin:/bin"}, ""},
		{"allowed by request", map[string]string{"A": "1"}, []string{"A"}, nil, []string{"A=1", "PATH=/usr/bin:/bin"}, ""},
		{"allowed by runner", map[string]string{"CI": "true"}, nil, []string{"CI"}, []string{"CI=true", "PATH=/usr/bin:/bin"}, ""},
		{"denied", map[string]string{"AWS_SECRET_ACCESS_KEY": "x"}, []string{"A"}, nil, nil, job.CodeEnvDenied},
		{"base key override needs allowance", map[string]string{"PATH": "/evil"}, nil, nil, nil, job.CodeEnvDenied},
		{"allowed override", map[string]string{"PATH": "/opt/bin"}, []string{"PATH"}, nil, []string{"PATH=/opt/bin"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := req([]string{"true"}, names("true")...)
			r.Command.Env = tt.env
			r.Policy.AllowedEnv = tt.allowed
			d, err := Decide(r, Config{BaseEnv: base, AllowedEnv: tt.runner})
			if codeOf(err) != tt.code {
				t.Fatalf("code = %v, want %q", err, tt.code)
			}
			if err == nil {
				if diff := cmp.Diff(tt.want, d.Env); diff != "" {
					t.Errorf("env mismatch (-want +got):\n%s", diff)
				}
			} else if err.Details["key"] == nil {
				t.Errorf("env denial lacks the key: %v", err)
			}
		})
	}
}

func TestWrappedCommands(t *testing.T) {
	tests := []struct {
		argv []string
		want []string
	}{
		{[]string{"pytest", "-q"}, []string{"pytest"}},
		{[]string{"timeout", "10", "pytest"}, []string{"timeout", "pytest"}},
		{[]string{"env", "A=1", "B=2", "python3", "x.py"}, []string{"env", "python3"}},
		{[]string{"nice", "-n", "10", "make"}, []string{"nice", "make"}},
		{[]string{"xargs", "-0", "grep", "x"}, []string{"xargs", "grep"}},
		{[]string{"env"}, []string{"env"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, WrappedCommands(tt.argv)); diff != "" {
			t.Errorf("WrappedCommands(%q) (-want +got):\n%s", tt.argv, diff)
		}
	}
}

func TestPolicyVersionStable(t *testing.T) {
	p := job.Policy{AllowedCommands: names("a", "b"), AllowedEnv: []string{"X"}}
	same := job.Policy{AllowedCommands: names("a", "b"), AllowedEnv: []string{"X"}}
	if job.PolicyVersion(p) != job.PolicyVersion(same) {
		t.Fatal("equal policies have different versions")
	}
	q := p
	q.AllowShell = true
	if job.PolicyVersion(p) == job.PolicyVersion(q) {
		t.Error("policy version ignores allow_shell")
	}
}

// TestDecideWrapperBypasses covers command lines that once slipped past the
// allowlist, the environment allowlist or a pinned path through a wrapper.
func TestDecideWrapperBypasses(t *testing.T) {
	deep := []string{}
	for i := 0; i < 40; i++ {
		deep = append(deep, "nice")
	}
	tests := []struct {
		name string
		req  job.Request
		want job.Code
	}{
		{"nine nested wrappers then a denied command", req([]string{"nice", "nice", "nice", "nice", "nice", "nice", "nice", "nice", "curl", "x"}, names("nice")...), job.CodeCommandDenied},
		{"wrapper chain past the bound", req(append(deep, "true"), names("nice", "true")...), job.CodeCommandDenied},
		{"env -S runs an unlisted command", req([]string{"env", "-S", "curl http://x"}, names("env")...), job.CodeCommandDenied},
		{"env -S attached", req([]string{"env", "-Scurl http://x"}, names("env")...), job.CodeCommandDenied},
		{"env --split-string=", req([]string{"env", "--split-string=curl x"}, names("env")...), job.CodeCommandDenied},
		{"env -S with an allowed command", req([]string{"env", "-S", "true -x"}, names("env", "true")...), ""},
		{"env -S quoted shell", req([]string{"env", "-S", "'sh' -c id"}, names("env", "sh")...), job.CodeShellDenied},
		{"env -S with expansion", req([]string{"env", "-S", "${X} -c id"}, names("env", "true")...), job.CodeCommandDenied},
		{"env -S cannot carry a pinned command", req([]string{"env", "-S", "true"}, job.CommandRule{Basename: "env"}, job.CommandRule{Basename: "true", Path: "/bin/true"}), job.CodeCommandDenied},
		{"env assignment not allowed", req([]string{"env", "LD_PRELOAD=/tmp/x.so", "true"}, names("env", "true")...), job.CodeEnvDenied},
		{"env PATH override not allowed", req([]string{"env", "PATH=./bin", "true"}, names("env", "true")...), job.CodeEnvDenied},
		{"wrapped pinned path mismatch", req([]string{"timeout", "5", "/tmp/python3"}, job.CommandRule{Basename: "timeout"}, job.CommandRule{Basename: "python3", Path: "/usr/bin/python3"}), job.CodeCommandDenied},
		{"wrapped wrong digest", req([]string{"timeout", "5", "true"}, job.CommandRule{Basename: "timeout"}, job.CommandRule{Basename: "true", Path: "/bin/true", SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}), job.CodeCommandDenied},
		{"wrapped not on search path", req([]string{"timeout", "5", "no-such-program-xyz"}, names("timeout", "no-such-program-xyz")...), job.CodeRunSpawnFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decide(tt.req, Config{})
			if got := codeOf(err); got != tt.want {
				t.Errorf("Decide(%q) code = %q (%v), want %q", tt.req.Command.Argv, got, err, tt.want)
			}
		})
	}
}

func TestDecideEnvAssignAllowed(t *testing.T) {
	r := req([]string{"env", "A=1", "true"}, names("env", "true")...)
	r.Policy.AllowedEnv = []string{"A"}
	if _, err := Decide(r, Config{}); err != nil {
		t.Errorf("env A=1 with A allowed by the request: %v", err)
	}
	r.Policy.AllowedEnv = nil
	if _, err := Decide(r, Config{AllowedEnv: []string{"A"}}); err != nil {
		t.Errorf("env A=1 with A allowed by the runner: %v", err)
	}
}

// TestDecideWrappedResolved checks that wrapped programs are exec'd by the
// path the policy checked, not looked up again by the wrapper.
func TestDecideWrappedResolved(t *testing.T) {
	tests := []struct {
		argv  []string
		rules []job.CommandRule
		want  []string
	}{
		{[]string{"timeout", "5", "true"}, names("timeout", "true"), []string{"/usr/bin/timeout", "5", "/usr/bin/true"}},
		{[]string{"env", "--", "nice", "-n", "3", "python3", "-V"}, names("env", "nice", "python3"), []string{"/usr/bin/env", "--", "/usr/bin/nice", "-n", "3", "/usr/bin/python3", "-V"}},
		{[]string{"nice", "python"}, []job.CommandRule{{Basename: "nice"}, {Basename: "python", Path: "/bin/true"}}, []string{"/usr/bin/nice", "/bin/true"}},
		{[]string{"timeout", "5", "./run.sh"}, names("timeout", "run.sh"), []string{"/usr/bin/timeout", "5", "./run.sh"}},
	}
	for _, tt := range tests {
		d, err := Decide(req(tt.argv, tt.rules...), Config{})
		if err != nil {
			t.Errorf("Decide(%q): %v", tt.argv, err)
			continue
		}
		if diff := cmp.Diff(tt.want, d.Argv); diff != "" {
			t.Errorf("Decide(%q) argv (-want +got):\n%s", tt.argv, diff)
		}
	}
}

func TestPolicyVersionCanonical(t *testing.T) {
	p := job.Policy{
		AllowedCommands: []job.CommandRule{{Basename: "b"}, {Basename: "a", Path: "/x/a"}, {Basename: "a", Path: "/y/a"}},
		AllowedEnv:      []string{"Y", "X", "Y"},
		ArtifactGlobs:   []string{"b/**", "a/**"},
	}
	reordered := job.Policy{
		AllowedCommands: []job.CommandRule{{Basename: "a", Path: "/x/a"}, {Basename: "a", Path: "/y/a"}, {Basename: "b"}},
		AllowedEnv:      []string{"X", "Y"},
		ArtifactGlobs:   []string{"a/**", "b/**"},
	}
	if job.PolicyVersion(p) != job.PolicyVersion(reordered) {
		t.Error("the same policy in another order has another version")
	}
	// Which rule comes first for one basename decides the pinned path, so
	// swapping those two is a different policy.
	swapped := reordered
	swapped.AllowedCommands = []job.CommandRule{{Basename: "a", Path: "/y/a"}, {Basename: "a", Path: "/x/a"}, {Basename: "b"}}
	if job.PolicyVersion(swapped) == job.PolicyVersion(reordered) {
		t.Error("rules for one basename in another order (a different decision) share a version")
	}
	before := append([]string(nil), p.AllowedEnv...)
	job.PolicyVersion(p)
	if diff := cmp.Diff(before, p.AllowedEnv); diff != "" {
		t.Errorf("PolicyVersion modified its argument:\n%s", diff)
	}
	for name, change := range map[string]func(*job.Policy){
		"allow_shell":    func(p *job.Policy) { p.AllowShell = true },
		"network":        func(p *job.Policy) { p.Network = job.NetworkHost },
		"env":            func(p *job.Policy) { p.AllowedEnv = append(p.AllowedEnv, "Z") },
		"command":        func(p *job.Policy) { p.AllowedCommands = append(p.AllowedCommands, job.CommandRule{Basename: "c"}) },
		"digest":         func(p *job.Policy) { p.AllowedCommands[0].SHA256 = "00" },
		"deny glob":      func(p *job.Policy) { p.ArtifactDenyGlobs = []string{"*.log"} },
		"artifact globs": func(p *job.Policy) { p.ArtifactGlobs = nil },
	} {
		q := reordered
		q.AllowedCommands = slices.Clone(reordered.AllowedCommands)
		q.AllowedEnv = slices.Clone(reordered.AllowedEnv)
		change(&q)
		if job.PolicyVersion(q) == job.PolicyVersion(reordered) {
			t.Errorf("changing %s did not change the policy version", name)
		}
	}
}

// TestDecideInsideTheView: with a backend's view, bare names resolve on
// the sandbox's PATH to programs inside the view only, whatever the host
// has first, and a program outside the view is denied naming the flag.
func TestDecideInsideTheView(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inside, shim := filepath.Join(dir, "tool"), filepath.Join(dir, "shims")
	tool, both := mk("tool/bin/tool"), mk("tool/bin/python3")
	mk("shims/python3")
	hidden := mk("shims/hidden")
	if err := os.Symlink(hidden, filepath.Join(inside, "bin", "link")); err != nil {
		t.Fatal(err)
	}
	view := &backend.View{Roots: []string{inside}, Path: []string{shim, filepath.Join(inside, "bin")}}
	cfg := Config{View: view, SearchPath: []string{shim}}
	tests := []struct {
		name    string
		argv    []string
		want    job.Code
		argv0   string
		message string
	}{
		{"bare name inside the view", []string{"tool"}, "", tool, ""},
		{"a shim earlier on the PATH is skipped", []string{"python3"}, "", both, ""},
		{"bare name only outside", []string{"hidden"}, job.CodeCommandDenied, "", "is outside the sandbox view (" + inside + "); add --sandbox-ro " + dir},
		{"absolute path outside", []string{hidden}, job.CodeCommandDenied, "", "add --sandbox-ro " + dir},
		{"link inside to a target outside", []string{filepath.Join(inside, "bin", "link")}, job.CodeCommandDenied, "", "outside the sandbox view"},
		{"not anywhere", []string{"no-such-program-xyz"}, job.CodeRunSpawnFailed, "", "not found on the sandbox PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := filepath.Base(tt.argv[0])
			d, err := Decide(req(tt.argv, names(base)...), cfg)
			if got := codeOf(err); got != tt.want {
				t.Fatalf("Decide(%q) code = %q (%v), want %q", tt.argv, got, err, tt.want)
			}
			if err != nil && !strings.Contains(err.Message, tt.message) {
				t.Errorf("Decide(%q) message = %q, want it to contain %q", tt.argv, err.Message, tt.message)
			}
			if err == nil && d.Argv[0] != tt.argv0 {
				t.Errorf("Decide(%q) argv0 = %q, want %q", tt.argv, d.Argv[0], tt.argv0)
			}
			if err == nil && !slices.Contains(d.Env, "PATH="+shim+":"+filepath.Join(inside, "bin")) {
				t.Errorf("Decide(%q) env = %q, want the view's PATH", tt.argv, d.Env)
			}
		})
	}
}
