package model

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// DefaultOpenAIBaseURL is used when OpenAI.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// OpenAI is an OpenAI-compatible chat-completions client with tool
// calling. BaseURL points at any compatible server (".../v1").
type OpenAI struct {
	BaseURL    string
	APIKey     string
	Model      string
	MaxTokens  int
	HTTP       *http.Client
	MaxRetries int
	// Sleep waits between retries (tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
}

var _ Client = (*OpenAI)(nil)

// Name implements Client.
func (c *OpenAI) Name() string { return "openai:" + c.Model }

type oaMessage struct {
	Role       string       `json:"role"`
	Content    *string      `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type oaReply struct {
	Choices []struct {
		Message      oaMessage `json:"message"`
		FinishReason string    `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Complete implements Client.
func (c *OpenAI) Complete(ctx context.Context, req Request) (Reply, error) {
	msgs := []oaMessage{{Role: "system", Content: &req.System}}
	for _, m := range req.Messages {
		om := oaMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		content := m.Content
		om.Content = &content
		if m.Role == RoleAssistant && content == "" && len(m.ToolCalls) > 0 {
			om.Content = nil
		}
		for _, tc := range m.ToolCalls {
			otc := oaToolCall{ID: tc.ID, Type: "function"}
			otc.Function.Name, otc.Function.Arguments = tc.Name, string(tc.Args)
			om.ToolCalls = append(om.ToolCalls, otc)
		}
		msgs = append(msgs, om)
	}
	body := map[string]any{"model": c.Model, "messages": msgs}
	if c.MaxTokens > 0 {
		body["max_tokens"] = c.MaxTokens
	}
	if len(req.Tools) > 0 {
		var tools []oaTool
		for _, t := range req.Tools {
			ot := oaTool{Type: "function"}
			ot.Function.Name, ot.Function.Description, ot.Function.Parameters = t.Name, t.Description, t.InputSchema
			tools = append(tools, ot)
		}
		body["tools"] = tools
	}
	base := strings.TrimRight(c.BaseURL, "/")
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	headers := map[string]string{}
	if c.APIKey != "" {
		headers["Authorization"] = "Bearer " + c.APIKey
	}
	t := transport{provider: "openai", http: c.HTTP, maxRetries: retries(c.MaxRetries), sleep: c.Sleep}
	b, err := t.post(ctx, base+"/chat/completions", headers, body, errorsFrom("openai"))
	if err != nil {
		return Reply{}, err
	}
	var r oaReply
	if err := json.Unmarshal(b, &r); err != nil {
		return Reply{}, &MalformedError{"openai", err.Error()}
	}
	if len(r.Choices) == 0 {
		return Reply{}, &MalformedError{"openai", "no choices"}
	}
	ch := r.Choices[0]
	out := Reply{StopReason: ch.FinishReason, Usage: Usage{r.Usage.PromptTokens, r.Usage.CompletionTokens}}
	out.Message.Role = RoleAssistant
	if ch.Message.Content != nil {
		out.Message.Content = *ch.Message.Content
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Function.Name == "" || tc.ID == "" {
			return Reply{}, &MalformedError{"openai", "tool call without id or function name"}
		}
		args := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			args = json.RawMessage(`{}`)
		}
		out.Message.ToolCalls = append(out.Message.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args})
	}
	if out.Message.Content == "" && len(out.Message.ToolCalls) == 0 {
		return Reply{}, &MalformedError{"openai", "reply has neither content nor tool calls"}
	}
	return out, nil
}

func retries(n int) int {
	if n == 0 {
		return DefaultMaxRetries
	}
	return max(n, 0)
}
