package acceptance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agent-runner/agent-runner/backend/oci"
)

// binDir holds the agent-runner binary the scripts run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acceptance-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// World-searchable: a sandbox's uid re-executes the binary.
	os.Chmod(dir, 0o755)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "agent-runner"), "../cmd/agent-runner")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building agent-runner:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestScripts(t *testing.T) {
	repoRoot, _ := filepath.Abs("..")
	// Searchable by others: sandboxed uids reach their mount points there.
	root, err := os.MkdirTemp("", "acceptance-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		WorkdirRoot:         root,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			env.Setenv("REPO", repoRoot)
			env.Setenv("HOME", filepath.Join(env.WorkDir, ".home"))
			// The scripts' work directories are read by sandboxed uids.
			tmp := filepath.Join(env.WorkDir, ".tmp")
			if err := os.MkdirAll(tmp, 0o755); err != nil {
				return err
			}
			os.Chmod(tmp, 0o1777)
			return os.Chmod(env.WorkDir, 0o755)
		},
		Cmds:      commands,
		Condition: condition,
	})
}

// condition answers the scripts' [root], [sandbox], [pytest], [node]
// [busybox] (a static busybox at /bin/busybox, for test images), [runc]
// and [runsc] (the oci backend's runtimes answer, as root).
func condition(cond string) (bool, error) {
	switch cond {
	case "busybox":
		_, err := os.Stat("/bin/busybox")
		return err == nil, nil
	case "runc", "runsc":
		return oci.RuntimeAvailable(context.Background(), cond) == nil && os.Geteuid() == 0, nil
	case "root":
		return os.Geteuid() == 0, nil
	case "sandbox":
		return sandboxWorks(), nil
	case "pytest":
		return exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run() == nil, nil
	case "node":
		return nodeWorks(), nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

// sandboxWorks runs one linux_sandbox job, once per test binary.
var sandboxWorks = sync.OnceValue(func() bool {
	dir, err := os.MkdirTemp("", "acceptance-probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	req := fmt.Sprintf(`{"workspace":{"path":%q},"command":{"argv":["/bin/true"]},"policy":{"allowed_commands":["true"]},"backend":{"kind":"linux_sandbox"}}`, dir)
	cmd := exec.Command(filepath.Join(binDir, "agent-runner"), "run", "--request", "-", "--store-dir", filepath.Join(dir, "store"))
	cmd.Stdin = strings.NewReader(req)
	out, _ := cmd.Output()
	ok := strings.Contains(string(out), `"status": "completed"`)
	if !ok {
		fmt.Fprintf(os.Stderr, "acceptance: linux_sandbox cannot run a job here; [sandbox] scripts skip: %s\n", out)
	}
	return ok
})
