// Package logtest captures a logger's JSON output in tests and reads back
// the problems (WARN and above) it logged, so a test can check that one
// failure was logged exactly once, at its boundary.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
)

// Line is what a test checks of one logged problem: its level, message
// and the value of the id attribute it names (job_id, task_id).
type Line struct{ Level, Msg, ID string }

// Capture is a JSON slog handler's output, safe for concurrent writers.
type Capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// String is everything logged so far.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Logger logs into c as JSON.
func (c *Capture) Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(c, nil)) }

// Problems are the lines logged at WARN and above, in order, with the
// value of idKey.
func (c *Capture) Problems(t testing.TB, idKey string) []Line {
	t.Helper()
	var out []Line
	sc := bufio.NewScanner(bytes.NewReader([]byte(c.String())))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		l := Line{Level: str(slog.LevelKey), Msg: str(slog.MessageKey), ID: str(idKey)}
		if l.Level == slog.LevelWarn.String() || l.Level == slog.LevelError.String() {
			out = append(out, l)
		}
	}
	return out
}
