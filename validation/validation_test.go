package validation

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func base(t *testing.T) job.Request {
	return job.Request{
		Workspace: job.Workspace{Path: t.TempDir()},
		Command:   job.Command{Argv: []string{"true"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}},
	}
}

var cfg = Config{DefaultBackend: "local_process", KnownBackend: func(k string) bool { return k == "local_process" || k == "firecracker" }}

func TestRequestRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*job.Request)
		want   job.Code
	}{
		{"valid", func(*job.Request) {}, ""},
		{"bad job id", func(r *job.Request) { r.JobID = "../x" }, job.CodeInvalidRequest},
		{"job id with slash", func(r *job.Request) { r.JobID = "a/b" }, job.CodeInvalidRequest},
		{"unknown source", func(r *job.Request) { r.Workspace.Source = "git" }, job.CodeInvalidRequest},
		{"missing path", func(r *job.Request) { r.Workspace.Path = "" }, job.CodeInvalidRequest},
		{"path does not exist", func(r *job.Request) { r.Workspace.Path = "/nonexistent/ws" }, job.CodeInvalidRequest},
		{"path is a file", func(r *job.Request) { r.Workspace.Path = "/etc/hostname" }, job.CodeInvalidRequest},
		{"path with NUL", func(r *job.Request) { r.Workspace.Path = "/tmp\x00x" }, job.CodePathEscape},
		{"bad strategy", func(r *job.Request) { r.Workspace.SnapshotStrategy = "rsync" }, job.CodeInvalidRequest},
		{"bad include glob", func(r *job.Request) { r.Workspace.Include = []string{"src/[a"} }, job.CodeInvalidRequest},
		{"bad exclude glob", func(r *job.Request) { r.Workspace.Exclude = []string{"{a"} }, job.CodeInvalidRequest},
		{"empty glob", func(r *job.Request) { r.Workspace.Include = []string{""} }, job.CodeInvalidRequest},
		{"empty argv", func(r *job.Request) { r.Command.Argv = nil }, job.CodeInvalidRequest},
		{"empty program", func(r *job.Request) { r.Command.Argv = []string{""} }, job.CodeInvalidRequest},
		{"NUL in argument", func(r *job.Request) { r.Command.Argv = []string{"true", "a\x00b"} }, job.CodeInvalidRequest},
		{"cwd absolute", func(r *job.Request) { r.Command.Cwd = "/etc" }, job.CodePathEscape},
		{"cwd dotdot", func(r *job.Request) { r.Command.Cwd = "../x" }, job.CodePathEscape},
		{"cwd dotdot inside then out", func(r *job.Request) { r.Command.Cwd = "a/../../x" }, job.CodePathEscape},
		{"cwd control byte", func(r *job.Request) { r.Command.Cwd = "a\nb" }, job.CodePathEscape},
		{"cwd invalid utf8", func(r *job.Request) { r.Command.Cwd = "\xff" }, job.CodePathEscape},
		{"cwd backslash", func(r *job.Request) { r.Command.Cwd = "..\\x" }, job.CodePathEscape},
		{"cwd fine after dotdot", func(r *job.Request) { r.Command.Cwd = "a/../b" }, ""},
		{"env key with =", func(r *job.Request) { r.Command.Env = map[string]string{"A=B": "1"} }, job.CodeInvalidRequest},
		{"env value with NUL", func(r *job.Request) { r.Command.Env = map[string]string{"A": "\x00"} }, job.CodeInvalidRequest},
		{"rule without basename", func(r *job.Request) { r.Policy.AllowedCommands = []job.CommandRule{{Path: "/bin/true"}} }, job.CodeInvalidRequest},
		{"rule basename with slash", func(r *job.Request) { r.Policy.AllowedCommands = []job.CommandRule{{Basename: "bin/true"}} }, job.CodeInvalidRequest},
		{"rule relative path", func(r *job.Request) {
			r.Policy.AllowedCommands = []job.CommandRule{{Basename: "true", Path: "bin/true"}}
		}, job.CodeInvalidRequest},
		{"rule bad sha", func(r *job.Request) { r.Policy.AllowedCommands = []job.CommandRule{{Basename: "true", SHA256: "xyz"}} }, job.CodeInvalidRequest},
		{"allowed_env with =", func(r *job.Request) { r.Policy.AllowedEnv = []string{"A=1"} }, job.CodeInvalidRequest},
		{"unknown network", func(r *job.Request) { r.Policy.Network = "bridge" }, job.CodeInvalidRequest},
		{"allowlist with hosts", func(r *job.Request) {
			r.Policy.Network, r.Policy.AllowedHosts = job.NetworkAllowlist, []string{"pypi.org", "*.pythonhosted.org"}
		}, ""},
		{"allowlist without hosts", func(r *job.Request) { r.Policy.Network = job.NetworkAllowlist }, job.CodeInvalidRequest},
		{"hosts without allowlist", func(r *job.Request) { r.Policy.AllowedHosts = []string{"pypi.org"} }, job.CodeInvalidRequest},
		{"unknown write policy", func(r *job.Request) { r.Policy.WritePolicy = "anywhere" }, job.CodeInvalidRequest},
		{"artifact glob absolute", func(r *job.Request) { r.Policy.ArtifactGlobs = []string{"/etc/*"} }, job.CodePathEscape},
		{"artifact glob dotdot", func(r *job.Request) { r.Policy.ArtifactGlobs = []string{"../*"} }, job.CodePathEscape},
		{"artifact deny glob invalid", func(r *job.Request) { r.Policy.ArtifactDenyGlobs = []string{"[x"} }, job.CodeInvalidRequest},
		{"negative limit", func(r *job.Request) { r.Limits.TimeoutMS = -1 }, job.CodeInvalidRequest},
		{"limit over max", func(r *job.Request) { r.Limits.MemoryMB = DefaultMax.MemoryMB + 1 }, job.CodeLimitExceeded},
		{"bad on_interrupt", func(r *job.Request) { r.OnInterrupt = "later" }, job.CodeInvalidRequest},
		{"unknown backend", func(r *job.Request) { r.Backend.Kind = "docker" }, job.CodeInvalidRequest},
		{"cli spelling of backend", func(r *job.Request) { r.Backend.Kind = "local-process" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base(t)
			tt.mutate(&r)
			err := Request(&r, cfg)
			if got := job.CodeOf(err); got != tt.want {
				t.Errorf("Request() code = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestRequestDefaults(t *testing.T) {
	r := base(t)
	r.Limits.TimeoutMS = 5000
	if err := Request(&r, cfg); err != nil {
		t.Fatal(err)
	}
	if r.Command.Cwd != "." || r.Workspace.Source != "local_path" || r.Workspace.SnapshotStrategy != job.SnapshotCopy ||
		r.Policy.Network != job.NetworkDisabled || r.Policy.WritePolicy != "workspace_only" || r.Backend.Kind != "local_process" {
		t.Errorf("defaults not filled: %+v", r)
	}
	if r.Limits.TimeoutMS != 5000 || r.Limits.MaxStdoutBytes != DefaultLimits.MaxStdoutBytes {
		t.Errorf("limits = %+v, want request value kept and defaults filled", r.Limits)
	}
}

func TestLimitsRunnerConfig(t *testing.T) {
	c := cfg
	c.Defaults = job.Limits{TimeoutMS: 777}
	c.Max = job.Limits{TimeoutMS: 1000}
	r := base(t)
	if err := Request(&r, c); err != nil || r.Limits.TimeoutMS != 777 {
		t.Errorf("runner default: timeout = %d, %v; want 777", r.Limits.TimeoutMS, err)
	}
	r = base(t)
	r.Limits.TimeoutMS = 1001
	if err := Request(&r, c); job.CodeOf(err) != job.CodeLimitExceeded {
		t.Errorf("over runner max = %v, want %s", err, job.CodeLimitExceeded)
	}
}

// TestWorkspacePathResolved: a workspace path that is a symlink to a
// directory (or relative) becomes the real absolute directory, because the
// snapshot walk never follows a link, not even at the root.
func TestWorkspacePathResolved(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	os.Symlink("real", filepath.Join(dir, "link"))
	wantReal, _ := filepath.EvalSymlinks(real)
	t.Chdir(dir)
	for _, p := range []string{filepath.Join(dir, "link"), "link", "./real", real} {
		r := base(t)
		r.Workspace.Path = p
		if err := Request(&r, cfg); err != nil {
			t.Fatalf("Request(path %q): %v", p, err)
		}
		if r.Workspace.Path != wantReal {
			t.Errorf("workspace.path %q normalized to %q, want %q", p, r.Workspace.Path, wantReal)
		}
	}
	os.Symlink("missing", filepath.Join(dir, "dangling"))
	r := base(t)
	r.Workspace.Path = filepath.Join(dir, "dangling")
	if err := Request(&r, cfg); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("dangling workspace link = %v, want %s", err, job.CodeInvalidRequest)
	}
}

// TestEveryLimit checks each limit field through the JSON contract: a
// negative value is invalid, a value over the runner maximum is
// limit_exceeded, zero takes the default.
func TestEveryLimit(t *testing.T) {
	for _, f := range limitFields {
		for _, tt := range []struct {
			name string
			v    int64
			want job.Code
		}{
			{"negative", -1, job.CodeInvalidRequest},
			{"over max", *f.get(&DefaultMax) + 1, job.CodeLimitExceeded},
			{"at max", *f.get(&DefaultMax), ""},
			{"zero takes the default", 0, ""},
		} {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				r := base(t)
				if f.name == "disk_inodes" {
					r.Limits.DiskMB = 64 // an inode cap needs a size cap
				}
				*f.get(&r.Limits) = tt.v
				err := Request(&r, cfg)
				if got := job.CodeOf(err); got != tt.want {
					t.Fatalf("limits.%s = %d: %v, want %q", f.name, tt.v, err, tt.want)
				}
				want := *f.get(&DefaultLimits)
				switch f.name {
				case "tmp_mb":
					want = DefaultTmpMB(r.Limits.MemoryMB)
				case "disk_inodes":
					want = DefaultDiskInodes(r.Limits.DiskMB)
				}
				if tt.v == 0 && *f.get(&r.Limits) != want {
					t.Errorf("limits.%s default = %d, want %d", f.name, *f.get(&r.Limits), want)
				}
			})
		}
	}
}
