package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeLog(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Create(path, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	l.SetClock(func() time.Time { return time.Unix(0, 0) })
	l.Append(Event{Event: EventRunStart, Agent: "a"})
	for i := 0; i < n; i++ {
		l.Append(Event{Event: EventToolCall, Call: int64(i + 1), Tool: "read_log", Allowed: Bool(true)})
	}
	l.Append(Event{Event: EventRunEnd, ExitReason: "completed"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestChainIntact(t *testing.T) {
	path := writeLog(t, 3)
	rep, err := VerifyPath(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Lines != 5 || !rep.Complete {
		t.Errorf("Verify = %+v, want ok, 5 lines, complete", rep)
	}
	b, _ := os.ReadFile(path)
	first := strings.SplitN(string(b), "\n", 2)[0]
	if !strings.Contains(first, `"prev_sha256":"`+Genesis+`"`) {
		t.Errorf("first line %s does not chain to the genesis hash", first)
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	path := writeLog(t, 0)
	if _, err := Create(path, "x"); err == nil {
		t.Error("Create on an existing audit log succeeded, want an error (append-only)")
	}
}

func TestTamperDetected(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(lines []string) []string
		broken int
	}{
		{"edit line 2", func(l []string) []string { l[1] = strings.Replace(l[1], "read_log", "grep_log", 1); return l }, 3},
		{"delete line 3", func(l []string) []string { return append(l[:2], l[3:]...) }, 3},
		{"swap lines 2 and 3", func(l []string) []string { l[1], l[2] = l[2], l[1]; return l }, 2},
		{"edit first prev", func(l []string) []string { l[0] = strings.Replace(l[0], Genesis, strings.Repeat("1", 64), 1); return l }, 1},
		{"garbage line", func(l []string) []string { l[3] = "{oops"; return l }, 4},
		{"drop newline at end", nil, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeLog(t, 3)
			b, _ := os.ReadFile(path)
			if tt.edit == nil {
				b = bytes.TrimSuffix(b, []byte("\n"))
			} else {
				lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
				b = []byte(strings.Join(tt.edit(lines), "\n") + "\n")
			}
			rep, err := Verify(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.BrokenLine != tt.broken {
				t.Errorf("Verify = ok %v, broken line %d (%s); want not ok, line %d", rep.OK, rep.BrokenLine, rep.Problem, tt.broken)
			}
		})
	}
}

func TestTruncatedTailIsIncomplete(t *testing.T) {
	path := writeLog(t, 2)
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	rep, _ := Verify(strings.NewReader(strings.Join(lines[:3], "")))
	if !rep.OK || rep.Complete {
		t.Errorf("Verify of a cut log = %+v, want chain ok but not complete", rep)
	}
}
