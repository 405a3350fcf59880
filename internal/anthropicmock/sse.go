package anthropicmock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// chunkSize is how many bytes of text or tool input one delta carries, so a
// client has to join several.
const chunkSize = 16

// eventWriter writes server-sent events, flushing each one as it is made.
type eventWriter struct {
	w io.Writer
	f http.Flusher // nil when w cannot flush
}

// send writes one event: an event line, a data line with the JSON of data,
// and the blank line that ends it.
func (e eventWriter) send(name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	if e.f != nil {
		e.f.Flush()
	}
	return nil
}

// The event payloads.

type messageStart struct {
	Type    string  `json:"type"`
	Message message `json:"message"`
}

type blockStart struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	ContentBlock contentBlock `json:"content_block"`
}

type blockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta delta  `json:"delta"`
}

type delta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type blockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDelta struct {
	Type  string             `json:"type"`
	Delta messageDeltaFields `json:"delta"`
	Usage outputUsage        `json:"usage"`
}

type messageDeltaFields struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type outputUsage struct {
	OutputTokens int `json:"output_tokens"`
}

type typeOnly struct {
	Type string `json:"type"`
}

// chunks splits s into pieces of at most n bytes; an empty s is one empty
// piece, so every block gets at least one delta.
func chunks(s string, n int) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// stream writes turn t as the real API streams a Message: message_start, a
// ping, for each block content_block_start, its deltas (text_delta or
// input_json_delta) and content_block_stop, then message_delta with the stop
// reason and output usage, and message_stop.
func stream(e eventWriter, id, model string, inputTokens int, t Turn) error {
	start := message{
		ID: id, Type: "message", Role: "assistant", Model: model,
		Content: []contentBlock{},
		Usage:   usage{InputTokens: inputTokens, OutputTokens: 1},
	}
	if err := e.send("message_start", messageStart{Type: "message_start", Message: start}); err != nil {
		return err
	}
	if err := e.send("ping", typeOnly{Type: "ping"}); err != nil {
		return err
	}
	for i, b := range t.Blocks {
		if err := e.send("content_block_start", blockStart{Type: "content_block_start", Index: i, ContentBlock: startBlock(b)}); err != nil {
			return err
		}
		for _, piece := range blockDeltas(b) {
			if err := e.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: piece}); err != nil {
				return err
			}
		}
		if err := e.send("content_block_stop", blockStop{Type: "content_block_stop", Index: i}); err != nil {
			return err
		}
	}
	md := messageDelta{
		Type:  "message_delta",
		Delta: messageDeltaFields{StopReason: t.stopReason()},
		Usage: outputUsage{OutputTokens: outputTokens(t)},
	}
	if err := e.send("message_delta", md); err != nil {
		return err
	}
	return e.send("message_stop", typeOnly{Type: "message_stop"})
}

// blockDeltas are the deltas that carry b's text or tool input.
func blockDeltas(b Block) []delta {
	var out []delta
	if b.Type == "tool_use" {
		for _, p := range chunks(string(b.Input), chunkSize) {
			out = append(out, delta{Type: "input_json_delta", PartialJSON: &p})
		}
		return out
	}
	for _, p := range chunks(b.Text, chunkSize) {
		out = append(out, delta{Type: "text_delta", Text: &p})
	}
	return out
}
