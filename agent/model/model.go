// Package model is the agent's model-client interface and its
// implementations: a deterministic mock, an OpenAI-compatible
// chat-completions client (OpenAI, vLLM, llama.cpp, Ollama) and an
// Anthropic Messages client, all with tool calling over net/http.
//
// Tool results are handed to the model as data (tool-role messages or
// tool_result blocks), never merged into instructions.
package model

import (
	"context"
	"encoding/json"
	"fmt"
)

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one conversation turn in a provider-neutral form.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the assistant's requested calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
}

// ToolCall is one requested tool invocation.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Tool is one tool offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one completion request.
type Request struct {
	System   string    `json:"system"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
}

// Usage counts tokens when the provider reports them.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Reply is the model's next turn: an assistant message with text and/or
// tool calls. No tool calls means a final answer.
type Reply struct {
	Message    Message `json:"message"`
	StopReason string  `json:"stop_reason,omitempty"`
	Usage      Usage   `json:"usage"`
}

// Client produces the next assistant turn.
type Client interface {
	// Name identifies the client in records ("mock", "openai:gpt-4o").
	Name() string
	Complete(ctx context.Context, req Request) (Reply, error)
}

// APIError is a provider error reply (after retries).
type APIError struct {
	Provider string `json:"provider"`
	Status   int    `json:"status"`
	Type     string `json:"type,omitempty"`
	Message  string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s %s", e.Provider, e.Status, e.Type, e.Message)
}

// MalformedError is a reply the client could not interpret.
type MalformedError struct {
	Provider string
	Reason   string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("%s: malformed reply: %s", e.Provider, e.Reason)
}
