package runner_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// TestTimeoutKillsEscapedChild: a child that left the job's process group
// with setsid is still killed on timeout, and the result does not wait for
// the pipes it held.
func TestTimeoutKillsEscapedChild(t *testing.T) {
	for _, parentIgnoresTerm := range []bool{false, true} {
		f := newFixture(t, nil)
		marker := "agent-runner-setsid-check" + strings.ReplaceAll(filepath.Dir(f.ws), "/", "_")
		ignore := ""
		if parentIgnoresTerm {
			ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
		}
		req := f.request([]string{"python3", "-c", "import signal, subprocess, sys, time\n" + ignore +
			"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '" + marker + "'], start_new_session=True)\n" +
			"time.sleep(300)\n"}, "python3")
		req.Limits.TimeoutMS = 500
		res := f.run(req)
		if res.Status != job.StatusTimedOut {
			t.Fatalf("status = %s %+v, want timed_out", res.Status, res.Error)
		}
		for deadline := time.Now().Add(5 * time.Second); processWith(marker); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the setsid child (%q) outlived the timed-out job (parent ignores TERM: %v)", marker, parentIgnoresTerm)
			}
		}
	}
}
