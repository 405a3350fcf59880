package sandboxe2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

// workdir copies the seed fixtures to a directory the sandbox uid can
// reach and that the sandbox's own /tmp does not cover (/var/tmp), adds a
// git sample crate, and chdirs there.
func workdir(t *testing.T) string {
	t.Helper()
	b, ok := backend.Lookup("linux_sandbox")
	if !ok {
		t.Fatal("linux_sandbox is not registered")
	}
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable on this host: %v", err)
	}
	src, _ := filepath.Abs("../testdata/agent-runtime")
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("fixtures not found at %s: %v", src, err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "agent-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if out, err := exec.Command("cp", "-a", src+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	crate := filepath.Join(dir, "testdata", "sample-crate")
	os.MkdirAll(filepath.Join(crate, "target"), 0o755)
	// The sandbox runs as an unprivileged uid: a write root must be
	// writable by it (docs/agents.md).
	os.Chmod(filepath.Join(crate, "target"), 0o777)
	os.WriteFile(filepath.Join(crate, "README"), []byte("sample\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = crate
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	t.Chdir(dir)
	return dir
}

type jobOut struct {
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Backend  string `json:"backend"`
}

func run(t *testing.T, dir, manifest string, task *launch.Task) (launch.Summary, []jobOut) {
	t.Helper()
	s, err := launch.Open(context.Background(), manifest, "scripted", launch.Options{RunsDir: filepath.Join(dir, "runs")})
	if err != nil {
		t.Fatal(err)
	}
	var outs []jobOut
	for _, st := range task.Steps {
		out, err := s.Call(context.Background(), st.Tool, st.Args)
		var o jobOut
		if err == nil {
			json.Unmarshal(out, &o)
		}
		outs = append(outs, o)
	}
	sum, err := s.Finish(launch.ExitCompleted, "")
	if err != nil {
		t.Fatal(err)
	}
	return sum, outs
}

func TestTesterTasksOnSandbox(t *testing.T) {
	dir := workdir(t)
	for _, name := range []string{"tester-ok", "tester-git"} {
		task, err := launch.LoadTask("tasks/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		_, outs := run(t, dir, "agents/tester.yaml", task)
		o := outs[0]
		if o.Backend != "linux_sandbox" || o.Status != "completed" || o.ExitCode == nil || *o.ExitCode != 0 {
			t.Errorf("%s: %+v, want completed with exit 0 on linux_sandbox", name, o)
		}
		if name == "tester-git" && !strings.Contains(o.Stdout, "## main") {
			t.Errorf("tester-git stdout = %q, want the branch line", o.Stdout)
		}
	}
}

// Read roots are read-only inside the job, write roots writable, and
// nothing else of the host is visible.
func TestRootsInsideSandbox(t *testing.T) {
	dir := workdir(t)
	os.WriteFile("m.yaml", []byte(`name: roots
capabilities:
  tools: [run_tests]
  filesystem: {read: [testdata/sample-crate], write: [testdata/sample-crate/target]}
  commands: {allow: [/usr/bin/touch, /usr/bin/cat]}
`), 0o644)
	crate := filepath.Join(dir, "testdata", "sample-crate")
	step := func(cmd string, args ...string) launch.Step {
		b, _ := json.Marshal(map[string]any{"command": cmd, "working_directory": "testdata/sample-crate", "args": args})
		return launch.Step{Tool: "run_tests", Args: b}
	}
	task := &launch.Task{Steps: []launch.Step{
		step("/usr/bin/touch", filepath.Join(crate, "target", "built")),
		step("/usr/bin/touch", filepath.Join(crate, "README")),
		step("/usr/bin/cat", filepath.Join(dir, "agents", "tester.yaml")),
	}}
	_, outs := run(t, dir, "m.yaml", task)
	if o := outs[0]; o.Status != "completed" || *o.ExitCode != 0 {
		t.Errorf("touch in the write root: %+v, want success", o)
	}
	if _, err := os.Stat(filepath.Join(crate, "target", "built")); err != nil {
		t.Errorf("write root file not on the host: %v", err)
	}
	if o := outs[1]; o.ExitCode == nil || *o.ExitCode == 0 {
		t.Errorf("touch in the read root: %+v, want failure (read-only)", o)
	}
	if o := outs[2]; o.ExitCode == nil || *o.ExitCode == 0 || strings.Contains(o.Stdout, "tester") {
		t.Errorf("cat outside the roots: %+v, want not found", o)
	}
}
