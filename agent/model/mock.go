package model

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Mock is the deterministic model of the seed: list the log directory,
// tail the first file, grep the directory for a pattern, then answer. It
// uses only tools it is offered.
type Mock struct {
	// Dir is the log directory to inspect (as the agent would spell it).
	Dir string
	// Pattern is grepped for (default "ERROR").
	Pattern string
}

var _ Client = (*Mock)(nil)

// Name implements Client.
func (m *Mock) Name() string { return "mock" }

// Complete implements Client.
func (m *Mock) Complete(_ context.Context, req Request) (Reply, error) {
	pattern := m.Pattern
	if pattern == "" {
		pattern = "ERROR"
	}
	var results []ToolResult
	for _, msg := range req.Messages {
		if msg.Role == RoleTool {
			var r ToolResult
			if err := json.Unmarshal([]byte(msg.Content), &r); err != nil {
				return Reply{}, &MalformedError{"mock", "tool message is not a ToolResult: " + err.Error()}
			}
			results = append(results, r)
		}
	}
	offered := func(name string) bool {
		return slices.ContainsFunc(req.Tools, func(t Tool) bool { return t.Name == name })
	}
	call := func(name string, args any) (Reply, error) {
		b, _ := json.Marshal(args)
		id := fmt.Sprintf("mock_%d", len(results)+1)
		return Reply{StopReason: "tool_use", Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: id, Name: name, Args: b}}}}, nil
	}
	switch len(results) {
	case 0:
		if !offered("list_logs") {
			return final("I cannot inspect logs: list_logs is not among my tools."), nil
		}
		return call("list_logs", map[string]any{"directory": m.Dir})
	case 1:
		file := firstFile(results[0])
		if file == "" || !offered("tail_log") {
			return final(fmt.Sprintf("No log file to read in %s.", m.Dir)), nil
		}
		return call("tail_log", map[string]any{"path": path.Join(m.Dir, file), "lines": 20})
	case 2:
		if !offered("grep_log") {
			return final("Read the tail of the log; grep_log is not available."), nil
		}
		return call("grep_log", map[string]any{"path": m.Dir, "pattern": pattern})
	}
	return final(summarize(results[len(results)-1], pattern)), nil
}

func final(text string) Reply {
	return Reply{StopReason: "end_turn", Message: Message{Role: RoleAssistant, Content: text}}
}

func firstFile(r ToolResult) string {
	var list struct {
		Entries []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"entries"`
	}
	if !r.OK || json.Unmarshal(r.Result, &list) != nil {
		return ""
	}
	for _, e := range list.Entries {
		if e.Type == "file" {
			return e.Name
		}
	}
	return ""
}

func summarize(r ToolResult, pattern string) string {
	if !r.OK {
		msg := "unknown error"
		if r.Error != nil {
			msg = r.Error.Code + ": " + r.Error.Message
		}
		return "The search failed (" + msg + ")."
	}
	var g struct {
		Matches []struct {
			Path string `json:"path"`
			Line int    `json:"line"`
			Text string `json:"text"`
		} `json:"matches"`
	}
	if json.Unmarshal(r.Result, &g) != nil {
		return "The search result could not be read."
	}
	if len(g.Matches) == 0 {
		return fmt.Sprintf("No lines contain %q.", pattern)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Found %d line(s) containing %q:\n", len(g.Matches), pattern)
	for _, m := range g.Matches {
		fmt.Fprintf(&b, "- %s:%d: %s\n", m.Path, m.Line, m.Text)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
