package gateway

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent-runner/agent-runner/agent/manifest"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

// fakeJobs records the request and returns a canned result.
type fakeJobs struct {
	runs []job.Request
	opts []runner.Options
	res  job.Result
}

func (f *fakeJobs) Run(_ context.Context, req job.Request, opts runner.Options) (job.Result, error) {
	f.runs = append(f.runs, req)
	f.opts = append(f.opts, opts)
	return f.res, nil
}

func testerPolicy(t *testing.T, dir string, extra string) *manifest.Policy {
	return compile(t, dir, `name: tester
capabilities:
  tools: [run_tests, git_status]
  filesystem: {read: [crate], write: [crate/target, crate/missing]}
  commands: {allow: [/bin/true, /usr/bin/git, /bin/echo]}
  git: true
limits: {max_runtime_seconds: 60, max_memory_mb: 256, max_tool_calls: 10}
`+extra)
}

func TestRunTestsBuildsJobRequest(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "crate", "target"), 0o755))
	p := testerPolicy(t, dir, "")
	code := 0
	fj := &fakeJobs{res: job.Result{JobID: "job_1", Status: job.StatusCompleted, ExitCode: &code, Backend: "local_process", Stdout: job.Output{Text: "hi\n"}}}
	g := New(p, nil, fj, WithCwd(dir), WithBackend(BackendLocal))
	out, err := g.Invoke(context.Background(), "run_tests", json.RawMessage(`{"command":"/bin/echo","working_directory":"crate","args":["hi"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(fj.runs) != 1 {
		t.Fatalf("runs = %d, want 1", len(fj.runs))
	}
	echo, _ := p.Command("/bin/echo")
	want := job.Request{
		Workspace: job.Workspace{Path: filepath.Join(dir, "crate"), SnapshotStrategy: job.SnapshotCopy},
		Command:   job.Command{Argv: []string{"/bin/echo", "hi"}, Cwd: "."},
		Policy: job.Policy{
			AllowedCommands: []job.CommandRule{{Basename: "echo", Path: "/bin/echo", SHA256: echo.SHA256}},
			Network:         job.NetworkDisabled,
		},
		Limits:  job.Limits{TimeoutMS: 60000, MemoryMB: 256},
		Backend: job.BackendSpec{Kind: BackendLocal},
		Trace:   job.Trace(`{"agent":"tester"}`),
	}
	if diff := cmp.Diff(want, fj.runs[0], cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if got, want := fj.opts[0].ReadOnly, []string{filepath.Join(dir, "crate")}; !cmp.Equal(got, want) {
		t.Errorf("ReadOnly = %v, want %v", got, want)
	}
	if got, want := fj.opts[0].Writable, []string{filepath.Join(dir, "crate", "target")}; !cmp.Equal(got, want) {
		t.Errorf("Writable = %v, want %v", got, want)
	}
	var r JobToolResult
	json.Unmarshal(out, &r)
	if r.JobID != "job_1" || r.Stdout != "hi\n" || *r.ExitCode != 0 || !strings.Contains(r.BackendNote, "local_process") || !strings.Contains(r.BackendNote, "crate/missing") {
		t.Errorf("result = %+v", r)
	}
}

func TestSubprocessDenials(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "crate"), 0o755))
	fj := &fakeJobs{}
	g := New(testerPolicy(t, dir, ""), nil, fj, WithCwd(dir))
	nogit := New(compile(t, dir, "name: n\ncapabilities: {tools: [git_status], filesystem: {read: [crate]}, commands: {allow: [/usr/bin/git]}}\n"), nil, fj, WithCwd(dir))
	tests := []struct {
		name string
		g    *Gateway
		tool string
		args string
		code job.Code
	}{
		{"shell not allowlisted", g, "run_tests", `{"command":"/bin/sh","working_directory":"crate","args":["-c","echo pwned"]}`, job.CodeCommandDenied},
		{"relative command", g, "run_tests", `{"command":"true","working_directory":"crate"}`, job.CodeCommandDenied},
		{"unclean command", g, "run_tests", `{"command":"/bin/../bin/true","working_directory":"crate"}`, job.CodeCommandDenied},
		{"workdir outside", g, "run_tests", `{"command":"/bin/true","working_directory":"/tmp"}`, job.CodePathEscape},
		{"workdir dotdot", g, "run_tests", `{"command":"/bin/true","working_directory":"crate/.."}`, job.CodePathEscape},
		{"git_status with non-git binary", g, "git_status", `{"command":"/bin/true","working_directory":"crate"}`, job.CodeCommandDenied},
		{"git_status without capabilities.git", nogit, "git_status", `{"working_directory":"crate"}`, job.CodeToolDenied},
		{"NUL in args", g, "run_tests", `{"command":"/bin/true","working_directory":"crate","args":["a\u0000b"]}`, job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.g.Invoke(context.Background(), tt.tool, json.RawMessage(tt.args))
			if got := job.CodeOf(err); got != tt.code {
				t.Errorf("code = %q (%v), want %q", got, err, tt.code)
			}
		})
	}
	if len(fj.runs) != 0 {
		t.Errorf("denied calls ran %d jobs, want 0", len(fj.runs))
	}
	if got := len(nogit.Tools()); got != 0 {
		t.Errorf("git_status offered without capabilities.git (%d tools)", got)
	}
}

// TestSubprocessThroughRunner runs real jobs through the pipeline on
// local_process, named explicitly (linux_sandbox is not linked into this
// test binary).
func TestSubprocessThroughRunner(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil || git != "/usr/bin/git" {
		t.Fatalf("git is required at /usr/bin/git (apt-get install git): %v %q", err, git)
	}
	dir := t.TempDir()
	crate := filepath.Join(dir, "crate")
	must(t, os.MkdirAll(crate, 0o755))
	mustWrite(t, filepath.Join(crate, "tracked.txt"), "x\n")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "tracked.txt"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = crate
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	mustWrite(t, filepath.Join(crate, "new.txt"), "n\n")
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store")})
	if err != nil {
		t.Fatal(err)
	}
	g := New(testerPolicy(t, dir, ""), nil, r, WithCwd(dir), WithBackend(BackendLocal))
	out, err := g.Invoke(context.Background(), "run_tests", json.RawMessage(`{"command":"/bin/echo","working_directory":"crate","args":["ran"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var res JobToolResult
	json.Unmarshal(out, &res)
	if res.Status != job.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "ran\n" {
		t.Errorf("run_tests = %+v, want completed, exit 0, stdout ran", res)
	}
	out, err = g.Invoke(context.Background(), "git_status", json.RawMessage(`{"command":"/usr/bin/git","working_directory":"crate"}`))
	if err != nil {
		t.Fatal(err)
	}
	res = JobToolResult{}
	json.Unmarshal(out, &res)
	if res.Status != job.StatusCompleted || !strings.Contains(res.Stdout, "## main") || !strings.Contains(res.Stdout, "?? new.txt") {
		t.Errorf("git_status = %+v, want branch main and untracked new.txt", res)
	}
}

// A manifest's capabilities.network_hosts make its subprocess jobs
// "allowlist" jobs to those hosts (the runner then holds them to the
// operator's ceiling); network: true alone asks for the host's network.
func TestNetworkHostsBecomeAnAllowlist(t *testing.T) {
	for _, tt := range []struct {
		caps, network string
		hosts         []string
	}{
		{"", job.NetworkDisabled, nil},
		{"  network: true\n", job.NetworkHost, nil},
		{"  network_hosts: [pypi.org, \"*.pythonhosted.org\"]\n", job.NetworkAllowlist, []string{"pypi.org", "*.pythonhosted.org"}},
	} {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "crate"), 0o755))
		p := compile(t, dir, `name: tester
capabilities:
  tools: [run_tests]
  filesystem: {read: [crate]}
  commands: {allow: [/bin/echo]}
`+tt.caps+`limits: {max_runtime_seconds: 60}
`)
		fj := &fakeJobs{res: job.Result{JobID: "job_1", Status: job.StatusCompleted}}
		g := New(p, nil, fj, WithCwd(dir), WithBackend(BackendLocal))
		if _, err := g.Invoke(context.Background(), "run_tests", json.RawMessage(`{"command":"/bin/echo","working_directory":"crate"}`)); err != nil {
			t.Fatal(err)
		}
		if got := fj.runs[0].Policy; got.Network != tt.network || !cmp.Equal(got.AllowedHosts, tt.hosts, cmpopts.EquateEmpty()) {
			t.Errorf("capabilities %q: job network %q hosts %q, want %q %q", tt.caps, got.Network, got.AllowedHosts, tt.network, tt.hosts)
		}
	}
}
