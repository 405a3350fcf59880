package agentstep

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

// maxStreamLine bounds the stream-json line the tracker buffers; a longer
// line is skipped to its end.
const maxStreamLine = 4 << 20

// maxOpenTools bounds the tool calls the tracker remembers as running.
const maxOpenTools = 64

// tracker parses stream-json lines (Claude Code's --output-format
// stream-json: one JSON object per line; assistant messages carry
// tool_use content blocks, user messages the tool_result blocks that end
// them, and the last line is the result).
//
// It reads the agent's stdout as written, before scrubbing: a redacted
// value inside a line must not break its JSON, so that the counts stay
// right. What it keeps from the stream as text (the current tool's name,
// the result's error) is scrubbed before it is stored.
type tracker struct {
	scrub *scrubber

	mu       sync.Mutex
	p        Progress
	line     []byte
	skipping bool // the current line went over maxStreamLine
	// open lists the tool calls without a result yet, oldest first; the
	// newest is the current tool.
	open []openTool
	// resultError is the text of a result line with is_error set.
	resultError string
}

type openTool struct{ id, name string }

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

// failure is the scrubbed text of the stream's error result, if any.
func (t *tracker) failure() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.resultError
}

func (t *tracker) add(p []byte) {
	t.touch(len(p))
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.buffer(p)
			return
		}
		t.buffer(p[:i])
		if !t.skipping {
			t.parse(t.line)
		}
		t.line, t.skipping, p = t.line[:0], false, p[i+1:]
	}
}

// end parses a last line the agent left without a newline.
func (t *tracker) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.skipping && len(t.line) > 0 {
		t.parse(t.line)
	}
	t.line, t.skipping = t.line[:0], false
}

func (t *tracker) buffer(p []byte) {
	if t.skipping {
		return
	}
	if len(t.line)+len(p) > maxStreamLine {
		t.line, t.skipping = t.line[:0], true // not stream-json; do not grow forever
		return
	}
	t.line = append(t.line, p...)
}

type streamLine struct {
	Type    string `json:"type"`
	Message struct {
		// Content is a list of blocks, or a plain string (a user prompt).
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	IsError bool            `json:"is_error"`
	Result  json.RawMessage `json:"result"`
	Errors  []string        `json:"errors"`
}

type contentBlock struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	ToolUseID string `json:"tool_use_id"`
}

func (t *tracker) parse(line []byte) {
	var l streamLine
	if json.Unmarshal(bytes.TrimSpace(line), &l) != nil || l.Type == "" {
		return
	}
	t.p.Events++
	var blocks []contentBlock
	if c := bytes.TrimSpace(l.Message.Content); len(c) > 0 && c[0] == '[' {
		json.Unmarshal(c, &blocks) // the agent's output: what does not parse is not counted
	}
	for _, c := range blocks {
		switch c.Type {
		case "tool_use":
			t.p.ToolCalls++
			if len(t.open) == maxOpenTools {
				t.open = t.open[1:]
			}
			t.open = append(t.open, openTool{id: c.ID, name: t.scrubber().String(c.Name)})
		case "tool_result":
			for i, o := range t.open {
				if o.id == c.ToolUseID {
					t.open = append(t.open[:i], t.open[i+1:]...)
					break
				}
			}
		}
	}
	if l.Type == "result" {
		t.open = nil
		if l.IsError {
			t.resultError = excerpt(t.scrubber(), []byte(resultText(l)), false)
		}
	}
	t.p.CurrentTool = ""
	if n := len(t.open); n > 0 {
		t.p.CurrentTool = t.open[n-1].name
	}
}

// resultText is an error result's message: its result string, else its
// errors list.
func resultText(l streamLine) string {
	var s string
	if json.Unmarshal(l.Result, &s) == nil && s != "" {
		return s
	}
	var b bytes.Buffer
	for i, e := range l.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e)
	}
	return b.String()
}

func (t *tracker) scrubber() *scrubber {
	if t.scrub == nil {
		return &scrubber{}
	}
	return t.scrub
}
