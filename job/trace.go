package job

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Trace is caller metadata (trace_id, task_id, agent_id, workspace_id,
// gateway decisions, Ferrum keys, anything else). It is kept as the raw JSON
// object the caller sent, so unknown keys, key order and value bytes are
// echoed unchanged in the result.
type Trace json.RawMessage

// Known trace keys read by the runner.
const (
	TraceID     = "trace_id"
	TraceTaskID = "task_id"
	TraceAgent  = "agent_id"
)

// MarshalJSON writes the stored object (or nothing when empty).
func (t Trace) MarshalJSON() ([]byte, error) {
	if len(t) == 0 {
		return []byte("null"), nil
	}
	return []byte(t), nil
}

// UnmarshalJSON keeps the raw bytes after checking they form an object.
func (t *Trace) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*t = nil
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("trace must be a JSON object")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	*t = append((*t)[:0], b...)
	return nil
}

// String returns the value of a string-valued key, or "".
func (t Trace) String(key string) string {
	if len(t) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(t, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}

// WithString returns a copy of t with key set to value when key is absent.
// Existing keys are never overwritten, so caller metadata stays unchanged.
func (t Trace) WithString(key, value string) Trace {
	if t.String(key) != "" || value == "" {
		return t
	}
	v, _ := json.Marshal(value)
	k, _ := json.Marshal(key)
	body := bytes.TrimSpace(t)
	if len(body) < 2 {
		return Trace(append(append(append(append([]byte("{"), k...), ':'), v...), '}'))
	}
	inner := bytes.TrimSpace(body[1 : len(body)-1])
	out := append([]byte("{"), inner...)
	if len(inner) > 0 {
		out = append(out, ',')
	}
	out = append(append(append(out, k...), ':'), v...)
	return Trace(append(out, '}'))
}
