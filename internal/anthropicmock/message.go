package anthropicmock

import "encoding/json"

// The wire types of a Messages API answer, in the field order the real API
// sends.

type message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []contentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        usage          `json:"usage"`
}

type contentBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// block is b as a complete content block of a Message.
func block(b Block) contentBlock {
	if b.Type == "tool_use" {
		return contentBlock{Type: b.Type, ID: b.ID, Name: b.Name, Input: b.Input}
	}
	text := b.Text
	return contentBlock{Type: b.Type, Text: &text}
}

// startBlock is b as content_block_start announces it: empty text, empty
// input; the deltas carry the rest.
func startBlock(b Block) contentBlock {
	if b.Type == "tool_use" {
		return contentBlock{Type: b.Type, ID: b.ID, Name: b.Name, Input: json.RawMessage("{}")}
	}
	empty := ""
	return contentBlock{Type: b.Type, Text: &empty}
}

// outputTokens estimates a turn's output tokens, four bytes a token.
func outputTokens(t Turn) int {
	n := 0
	for _, b := range t.Blocks {
		n += len(b.Text) + len(b.Name) + len(b.Input)
	}
	return n/4 + 1
}

// complete is the whole Message for a non-streaming answer.
func complete(id, model string, inputTokens int, t Turn) message {
	content := make([]contentBlock, 0, len(t.Blocks))
	for _, b := range t.Blocks {
		content = append(content, block(b))
	}
	stop := t.stopReason()
	return message{
		ID: id, Type: "message", Role: "assistant", Model: model,
		Content: content, StopReason: &stop,
		Usage: usage{InputTokens: inputTokens, OutputTokens: outputTokens(t)},
	}
}
