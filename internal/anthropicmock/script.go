package anthropicmock

import (
	"encoding/json"
	"fmt"
)

// Block is one content block of an assistant turn: a text or a tool_use.
type Block struct {
	Type  string          // "text" or "tool_use"
	Text  string          // a text block's text
	ID    string          // a tool_use block's id (toolu_...)
	Name  string          // a tool_use block's tool name
	Input json.RawMessage // a tool_use block's input, a JSON object
}

// Text is a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// ToolUse is a tool_use block calling tool name with input, which must
// marshal to a JSON object; it panics otherwise, as a script that cannot be
// played is a mistake in the test that wrote it.
func ToolUse(id, name string, input any) Block {
	b, err := json.Marshal(input)
	if err != nil || len(b) == 0 || b[0] != '{' {
		panic(fmt.Sprintf("anthropicmock.ToolUse(%q): input is not a JSON object: %s %v", name, b, err))
	}
	return Block{Type: "tool_use", ID: id, Name: name, Input: b}
}

// Turn is one assistant answer.
type Turn struct {
	Blocks []Block
	// StopReason defaults to "tool_use" when a block is a tool_use, else
	// "end_turn".
	StopReason string
}

// stopReason is the turn's stop reason with its default applied.
func (t Turn) stopReason() string {
	if t.StopReason != "" {
		return t.StopReason
	}
	for _, b := range t.Blocks {
		if b.Type == "tool_use" {
			return "tool_use"
		}
	}
	return "end_turn"
}

// Script is the list of turns a Server plays. A request whose conversation
// holds n assistant messages is answered with turn n, so the answer depends
// on where the conversation is, not on how many requests came before it
// (clients retry, and make side requests of their own).
type Script []Turn

// turn returns the turn for a request with n assistant messages.
func (s Script) turn(n int) (Turn, bool) {
	if n < 0 || n >= len(s) {
		return Turn{}, false
	}
	return s[n], true
}

// messagesRequest is the part of a Messages API request body the mock reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

// assistantTurns counts the assistant messages in a request.
func (r messagesRequest) assistantTurns() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}
