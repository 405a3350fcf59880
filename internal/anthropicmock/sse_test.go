package anthropicmock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// event is one server-sent event as a client reads it.
type event struct {
	Name string
	Data string
}

// readEvents is a small SSE reader: "event:" and "data:" fields, events
// ended by a blank line. It refuses anything else the mock should not send
// (other fields, an event without its blank line, several data lines).
func readEvents(r io.Reader) ([]event, error) {
	var out []event
	var cur event
	open := false
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if !open {
				return out, fmt.Errorf("blank line outside an event")
			}
			out = append(out, cur)
			cur, open = event{}, false
		case strings.HasPrefix(line, "event: "):
			if open {
				return out, fmt.Errorf("event line %q inside event %q", line, cur.Name)
			}
			cur.Name, open = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			if !open || cur.Data != "" {
				return out, fmt.Errorf("data line %q without its own event line", line)
			}
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			return out, fmt.Errorf("unexpected line %q", line)
		}
	}
	if open {
		return out, fmt.Errorf("event %q not ended by a blank line", cur.Name)
	}
	return out, sc.Err()
}

// flushRecorder records what was written at each flush.
type flushRecorder struct {
	buf     bytes.Buffer
	flushes []string
}

func (f *flushRecorder) Write(p []byte) (int, error) { return f.buf.Write(p) }
func (f *flushRecorder) Flush()                      { f.flushes = append(f.flushes, f.buf.String()) }

func TestStreamFraming(t *testing.T) {
	input := `{"content":"hi from a longer piece of content","file_path":"/w/hello.txt"}`
	turn := Turn{Blocks: []Block{
		Text("I'll create the file now, in several deltas."),
		{Type: "tool_use", ID: "toolu_1", Name: "Write", Input: json.RawMessage(input)},
	}}
	rec := &flushRecorder{}
	if err := stream(eventWriter{w: rec, f: rec}, "msg_1", "claude-test", 42, turn); err != nil {
		t.Fatal(err)
	}
	events, err := readEvents(bytes.NewReader(rec.buf.Bytes()))
	if err != nil {
		t.Fatalf("readEvents: %v\n%s", err, rec.buf.String())
	}

	if len(rec.flushes) != len(events) {
		t.Errorf("flushes = %d, want one per event (%d)", len(rec.flushes), len(events))
	}
	for i, f := range rec.flushes {
		if !strings.HasSuffix(f, "\n\n") {
			t.Errorf("flush %d ends %q, want a whole event", i, f[max(0, len(f)-20):])
		}
	}

	// Collapse the deltas of each block to read the sequence.
	var names []string
	for _, e := range events {
		if len(names) > 0 && e.Name == "content_block_delta" && names[len(names)-1] == "content_block_delta+" {
			continue
		}
		if e.Name == "content_block_delta" {
			names = append(names, "content_block_delta+")
			continue
		}
		names = append(names, e.Name)
	}
	wantNames := []string{
		"message_start", "ping",
		"content_block_start", "content_block_delta+", "content_block_stop",
		"content_block_start", "content_block_delta+", "content_block_stop",
		"message_delta", "message_stop",
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}

	var text, partial strings.Builder
	deltas := map[int]int{}
	for _, e := range events {
		var d struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
			Message struct {
				ID         string  `json:"id"`
				Model      string  `json:"model"`
				Role       string  `json:"role"`
				StopReason *string `json:"stop_reason"`
				Usage      struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"message"`
			ContentBlock struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(e.Data), &d); err != nil {
			t.Fatalf("event %s data %q: %v", e.Name, e.Data, err)
		}
		if d.Type != e.Name {
			t.Errorf("event %q carries data type %q, want the same", e.Name, d.Type)
		}
		switch e.Name {
		case "message_start":
			m := d.Message
			if m.ID != "msg_1" || m.Model != "claude-test" || m.Role != "assistant" || m.StopReason != nil || m.Usage.InputTokens != 42 {
				t.Errorf("message_start = %s, want id msg_1, model claude-test, role assistant, null stop_reason, 42 input tokens", e.Data)
			}
		case "content_block_start":
			if d.Index == 1 && (d.ContentBlock.Type != "tool_use" || d.ContentBlock.ID != "toolu_1" || d.ContentBlock.Name != "Write" || string(d.ContentBlock.Input) != "{}") {
				t.Errorf("tool_use content_block_start = %s, want id, name and empty input", e.Data)
			}
		case "content_block_delta":
			deltas[d.Index]++
			switch {
			case d.Index == 0 && d.Delta.Type == "text_delta":
				text.WriteString(d.Delta.Text)
			case d.Index == 1 && d.Delta.Type == "input_json_delta":
				partial.WriteString(d.Delta.PartialJSON)
			default:
				t.Errorf("delta %s at index %d, want text_delta at 0, input_json_delta at 1", d.Delta.Type, d.Index)
			}
		case "message_delta":
			if d.Delta.StopReason != "tool_use" || d.Usage.OutputTokens == 0 {
				t.Errorf("message_delta = %s, want stop_reason tool_use and output usage", e.Data)
			}
		}
	}
	if got, want := text.String(), turn.Blocks[0].Text; got != want {
		t.Errorf("joined text deltas = %q, want %q", got, want)
	}
	if got := partial.String(); got != input {
		t.Errorf("joined input_json deltas = %q, want %q", got, input)
	}
	if deltas[0] < 2 || deltas[1] < 2 {
		t.Errorf("deltas per block = %v, want several each (chunks of %d bytes)", deltas, chunkSize)
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want []string
	}{
		{"", 4, []string{""}},
		{"abc", 4, []string{"abc"}},
		{"abcd", 4, []string{"abcd"}},
		{"abcdefghi", 4, []string{"abcd", "efgh", "i"}},
	}
	for _, tt := range tests {
		if got := chunks(tt.in, tt.n); !cmp.Equal(got, tt.want) {
			t.Errorf("chunks(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestReadEventsRefusesBadFraming(t *testing.T) {
	for _, in := range []string{
		"event: ping\ndata: {}\n",          // no blank line
		"data: {}\n\n",                     // no event line
		"event: a\ndata: {}\ndata: {}\n\n", // two data lines
		"event: a\nid: 1\ndata: {}\n\n",    // another field
		"\n",                               // blank line alone
		"event: a\nevent: b\ndata: {}\n\n", // two event lines
	} {
		if _, err := readEvents(strings.NewReader(in)); err == nil {
			t.Errorf("readEvents(%q) = nil error, want an error", in)
		}
	}
}
