package agentstep_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/internal/logtest"

	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestLostOutputIsLoggedOnce: stdout.log and metrics.jsonl cannot be
// written (both lead to /dev/full). The run goes on and ends as the agent
// did; each file's failure is logged once however many writes failed,
// and no line holds the secret. Both errors were discarded before.
func TestLostOutputIsLoggedOnce(t *testing.T) {
	l, tk, _ := staged(t, `for i in $(seq 200); do echo "line $i of $ANTHROPIC_API_KEY"; done; sleep 0.3`, "1h")
	for _, f := range []string{"stdout.log", agentstep.HeartbeatFile} {
		p := filepath.Join(l.Progress(), f)
		os.Remove(p)
		if err := os.Symlink("/dev/full", p); err != nil {
			t.Fatal(err)
		}
	}
	var buf logtest.Capture
	out, err := agentstep.Run(context.Background(), l, tk, map[string]string{"ANTHROPIC_API_KEY": secret}, agentstep.Config{
		Backend: tasktest.Backend(t), HeartbeatEvery: 50 * time.Millisecond, Logger: buf.Logger(),
	})
	if err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("outcome = %+v, %v; want exit 0", out, err)
	}
	type line struct{ Level, Msg, File string }
	var got []line
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		got = append(got, line{str(slog.LevelKey), str(slog.MessageKey), str("file")})
	}
	want := []line{
		{"WARN", "cannot record a heartbeat; later failures of this run are not logged", agentstep.HeartbeatFile},
		{"ERROR", "the task's progress log is incomplete", "stdout.log"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s\n%s", diff, buf.String())
	}
	if strings.Contains(buf.String(), secret) {
		t.Errorf("the log holds the secret:\n%s", buf.String())
	}
}
