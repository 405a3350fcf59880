package agentrun

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// Progress is what the stream-json output says about the run so far.
type Progress struct {
	OutputBytes  int64     `json:"output_bytes"`
	ToolCalls    int       `json:"tool_calls"`
	CurrentTool  string    `json:"current_tool,omitempty"`
	LastActivity time.Time `json:"last_activity"`
	Events       int       `json:"events"`
}

// tracker parses stream-json lines (Claude Code's --output-format
// stream-json: one JSON object per line; assistant messages carry
// tool_use content blocks).
type tracker struct {
	mu   sync.Mutex
	p    Progress
	line []byte
}

func (t *tracker) touch(n int) {
	t.mu.Lock()
	t.p.OutputBytes += int64(n)
	t.p.LastActivity = time.Now()
	t.mu.Unlock()
}

func (t *tracker) last() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p.LastActivity
}

func (t *tracker) snapshot() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

func (t *tracker) add(p []byte) {
	t.touch(len(p))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.line = append(t.line, p...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			if len(t.line) > 1<<20 {
				t.line = t.line[:0] // not stream-json; do not grow forever
			}
			return
		}
		t.parse(t.line[:i])
		t.line = t.line[i+1:]
	}
}

type streamLine struct {
	Type    string `json:"type"`
	Message struct {
		Content []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"content"`
	} `json:"message"`
}

func (t *tracker) parse(line []byte) {
	var l streamLine
	if json.Unmarshal(bytes.TrimSpace(line), &l) != nil || l.Type == "" {
		return
	}
	t.p.Events++
	for _, c := range l.Message.Content {
		if c.Type == "tool_use" {
			t.p.ToolCalls++
			t.p.CurrentTool = c.Name
		}
	}
	if l.Type == "result" {
		t.p.CurrentTool = ""
	}
}
