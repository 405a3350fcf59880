package agentstep_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/stage"
)

// TestTasksDoNotShareHome: two tasks in a row; the second does not see
// what the first wrote into $HOME. On local_process every task's HOME was
// the host's /tmp, so one agent's ~/.claude settings and hooks reached the
// next. There HOME is now <task>/home (0700, kept for `task shell`,
// removed with the workspace); linux_sandbox keeps /tmp, its own tmpfs.
func TestTasksDoNotShareHome(t *testing.T) {
	backends := []backend.Backend{localprocess.Backend{}}
	b, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Available(context.Background()) == nil {
		backends = append(backends, b)
	} else {
		t.Log("linux_sandbox unavailable: local_process only")
	}
	marker := ".agent-settings-" + strings.ReplaceAll(t.Name(), "/", "-")
	t.Cleanup(func() { os.Remove(filepath.Join(os.TempDir(), marker)) }) // the old code wrote it there
	for _, b := range backends {
		t.Run(b.Kind(), func(t *testing.T) {
			run := func(script string) (stage.Layout, string) {
				l, tk, _ := staged(t, script, "1h")
				out, err := agentstep.Run(context.Background(), l, tk, nil, agentstep.Config{Backend: b})
				if err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
					t.Fatalf("run = %+v %v", out, err)
				}
				stdout, _ := os.ReadFile(filepath.Join(l.Progress(), "stdout.log"))
				return l, string(stdout)
			}
			_, first := run(`echo '{"hooks":"from the first task"}' > "$HOME/` + marker + `"; echo "home=$HOME"`)
			l, second := run(`if [ -e "$HOME/` + marker + `" ]; then echo SEEN; else echo CLEAN; fi; echo "home=$HOME"`)
			if !strings.HasPrefix(second, "CLEAN\n") {
				t.Errorf("the second task found the first task's file in $HOME: %q (first: %q)", second, first)
			}
			if b.Capabilities().Isolating {
				if want := "home=" + agentstep.SandboxHome + "\n"; !strings.HasSuffix(second, want) {
					t.Errorf("sandbox stdout = %q, want %q", second, want)
				}
				return
			}
			if first == second || !strings.HasSuffix(second, "home="+l.Home()+"\n") {
				t.Errorf("homes: first %q, second %q; want each task's own <task>/home", first, second)
			}
			fi, err := os.Stat(l.Home())
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("home = %v %v, want a 0700 directory", fi, err)
			}
			// task shell gets the same HOME, with what the agent left there.
			os.WriteFile(filepath.Join(l.Home(), "kept"), nil, 0o600)
			if home, err := agentstep.PrepareHome(l, b); err != nil || home != l.Home() {
				t.Errorf("PrepareHome again = %q %v, want %q", home, err, l.Home())
			}
			if _, err := os.Stat(filepath.Join(l.Home(), "kept")); err != nil {
				t.Error("PrepareHome lost the home's contents")
			}
			stage.RemoveWorkspace(l)
			if _, err := os.Stat(l.Home()); !os.IsNotExist(err) {
				t.Errorf("the home outlived the workspace: %v", err)
			}
		})
	}
}
