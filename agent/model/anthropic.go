package model

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Anthropic defaults.
const (
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	AnthropicVersion        = "2023-06-01"
	DefaultMaxTokens        = 4096
)

// Anthropic is an Anthropic Messages API client with tool use.
type Anthropic struct {
	BaseURL    string
	APIKey     string
	Model      string
	MaxTokens  int
	HTTP       *http.Client
	MaxRetries int
	Sleep      func(ctx context.Context, d time.Duration) error
}

var _ Client = (*Anthropic)(nil)

// Name implements Client.
func (c *Anthropic) Name() string { return "anthropic:" + c.Model }

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type anMessage struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

type anReply struct {
	Type       string    `json:"type"`
	Content    []anBlock `json:"content"`
	StopReason string    `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// Complete implements Client.
func (c *Anthropic) Complete(ctx context.Context, req Request) (Reply, error) {
	var msgs []anMessage
	for _, m := range req.Messages {
		switch m.Role {
		case RoleTool:
			blk := anBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError}
			// Consecutive tool results share one user message.
			if n := len(msgs); n > 0 && msgs[n-1].Role == RoleUser && msgs[n-1].Content[0].Type == "tool_result" {
				msgs[n-1].Content = append(msgs[n-1].Content, blk)
			} else {
				msgs = append(msgs, anMessage{Role: RoleUser, Content: []anBlock{blk}})
			}
		case RoleAssistant:
			am := anMessage{Role: RoleAssistant}
			if m.Content != "" {
				am.Content = append(am.Content, anBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				input := tc.Args
				if !json.Valid(input) {
					input, _ = json.Marshal(map[string]string{"_malformed": string(tc.Args)})
				}
				am.Content = append(am.Content, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
			msgs = append(msgs, am)
		default:
			msgs = append(msgs, anMessage{Role: RoleUser, Content: []anBlock{{Type: "text", Text: m.Content}}})
		}
	}
	maxTokens := c.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	body := map[string]any{"model": c.Model, "max_tokens": maxTokens, "system": req.System, "messages": msgs}
	if len(req.Tools) > 0 {
		var tools []map[string]any
		for _, t := range req.Tools {
			tools = append(tools, map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.InputSchema})
		}
		body["tools"] = tools
	}
	base := strings.TrimRight(c.BaseURL, "/")
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	headers := map[string]string{"anthropic-version": AnthropicVersion}
	if c.APIKey != "" {
		headers["x-api-key"] = c.APIKey
	}
	t := transport{provider: "anthropic", http: c.HTTP, maxRetries: retries(c.MaxRetries), sleep: c.Sleep}
	b, err := t.post(ctx, base+"/v1/messages", headers, body, errorsFrom("anthropic"))
	if err != nil {
		return Reply{}, err
	}
	var r anReply
	if err := json.Unmarshal(b, &r); err != nil {
		return Reply{}, &MalformedError{"anthropic", err.Error()}
	}
	if r.Type != "" && r.Type != "message" {
		return Reply{}, &MalformedError{"anthropic", "reply type " + r.Type}
	}
	out := Reply{StopReason: r.StopReason, Usage: Usage{r.Usage.InputTokens, r.Usage.OutputTokens}}
	out.Message.Role = RoleAssistant
	var text []string
	for _, blk := range r.Content {
		switch blk.Type {
		case "text":
			text = append(text, blk.Text)
		case "tool_use":
			if blk.ID == "" || blk.Name == "" {
				return Reply{}, &MalformedError{"anthropic", "tool_use block without id or name"}
			}
			args := blk.Input
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, ToolCall{ID: blk.ID, Name: blk.Name, Args: args})
		}
	}
	out.Message.Content = strings.Join(text, "\n")
	if out.Message.Content == "" && len(out.Message.ToolCalls) == 0 {
		return Reply{}, &MalformedError{"anthropic", "reply has neither text nor tool_use blocks"}
	}
	return out, nil
}
