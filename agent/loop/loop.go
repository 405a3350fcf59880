// Package loop is the agent loop: it offers the manifest's tools to a
// model client, routes every tool call through the session's gateway,
// returns results to the model as data, and stops on a final answer, at
// max_tool_calls, at max_runtime or on a model error. It writes
// conversation.json beside the audit log.
package loop

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/agent/model"
	"github.com/agent-runner/agent-runner/job"
)

// Config is one agent run's input.
type Config struct {
	Client model.Client
	// Prompt is the agent's system prompt (from --prompt).
	Prompt string
	// Message is the user's request.
	Message string
}

// Turn is one model reply in conversation.json.
type Turn struct {
	Reply model.Reply `json:"reply"`
	Error string      `json:"error,omitempty"`
}

// Conversation is conversation.json. It holds no credentials: clients
// keep API keys in request headers only.
type Conversation struct {
	RunID    string          `json:"run_id"`
	Model    string          `json:"model"`
	System   string          `json:"system"`
	Tools    []model.Tool    `json:"tools"`
	Messages []model.Message `json:"messages"`
	Turns    []Turn          `json:"turns"`
	Usage    model.Usage     `json:"usage"`
}

// Run drives s with cfg until a stop condition and finishes the session.
// A model error ends the run with exit reason model_error and is returned
// after the records are written.
func Run(ctx context.Context, s *launch.Session, cfg Config) (launch.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Policy.Limits.MaxRuntime())
	defer cancel()
	conv := Conversation{RunID: s.ID, Model: cfg.Client.Name(), System: model.DataPreamble + cfg.Prompt, Tools: []model.Tool{}}
	for _, t := range s.Gateway.Tools() {
		conv.Tools = append(conv.Tools, model.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	conv.Messages = []model.Message{{Role: model.RoleUser, Content: cfg.Message}}
	reason, answer, runErr := drive(ctx, s, cfg.Client, &conv)
	if werr := writeConversation(s.Dir, &conv); werr != nil && runErr == nil {
		runErr = werr
	}
	sum, err := s.Finish(reason, answer)
	if runErr != nil {
		return sum, runErr
	}
	return sum, err
}

func drive(ctx context.Context, s *launch.Session, c model.Client, conv *Conversation) (reason, answer string, err error) {
	for {
		reply, err := c.Complete(ctx, model.Request{System: conv.System, Messages: conv.Messages, Tools: conv.Tools})
		if err != nil {
			conv.Turns = append(conv.Turns, Turn{Error: err.Error()})
			switch {
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				return launch.ExitMaxRuntime, "", nil
			case ctx.Err() != nil:
				return launch.ExitCanceled, "", nil
			}
			return launch.ExitModelError, "", err
		}
		conv.Turns = append(conv.Turns, Turn{Reply: reply})
		conv.Usage.InputTokens += reply.Usage.InputTokens
		conv.Usage.OutputTokens += reply.Usage.OutputTokens
		reply.Message.Role = model.RoleAssistant
		conv.Messages = append(conv.Messages, reply.Message)
		if len(reply.Message.ToolCalls) == 0 {
			return launch.ExitFinalAnswer, reply.Message.Content, nil
		}
		for _, tc := range reply.Message.ToolCalls {
			out, err := s.Call(ctx, tc.Name, tc.Args)
			tr := model.ToolResult{Tool: tc.Name, OK: err == nil, Result: out}
			if err != nil {
				e := job.AsError(err)
				tr.Error = &model.ToolError{Code: string(e.Code), Message: e.Message}
			}
			conv.Messages = append(conv.Messages, model.Message{
				Role: model.RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, Content: tr.Encode(), IsError: err != nil,
			})
			if launch.LimitReached(err) {
				return launch.ExitMaxToolCalls, "", nil
			}
			if ctx.Err() != nil {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return launch.ExitMaxRuntime, "", nil
				}
				return launch.ExitCanceled, "", nil
			}
		}
	}
}

func writeConversation(dir string, conv *Conversation) error {
	b, err := json.MarshalIndent(conv, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".conversation.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "write conversation.json")
	}
	return os.Rename(tmp, filepath.Join(dir, "conversation.json"))
}
