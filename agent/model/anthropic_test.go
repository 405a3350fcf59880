package model

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newAnthropic(t *testing.T, replies ...canned) (*Anthropic, *scripted, *recordSleep) {
	s := &scripted{replies: replies}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	rs := &recordSleep{}
	return &Anthropic{BaseURL: srv.URL, APIKey: "ak-test", Model: "claude-x", Sleep: rs.sleep}, s, rs
}

func TestAnthropicToolUse(t *testing.T) {
	c, s, _ := newAnthropic(t, canned{200, "", `{"type":"message","role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"grep_log","input":{"path":"logs","pattern":"ERROR"}}],"stop_reason":"tool_use","usage":{"input_tokens":20,"output_tokens":9}}`})
	got, err := c.Complete(context.Background(), testReq)
	if err != nil {
		t.Fatal(err)
	}
	want := Reply{StopReason: "tool_use", Usage: Usage{20, 9}, Message: Message{Role: RoleAssistant, Content: "Checking.",
		ToolCalls: []ToolCall{{ID: "toolu_1", Name: "grep_log", Args: json.RawMessage(`{"path":"logs","pattern":"ERROR"}`)}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reply (-want +got):\n%s", diff)
	}
	h := s.headers[0]
	if h.Get("x-api-key") != "ak-test" || h.Get("anthropic-version") != AnthropicVersion || s.paths[0] != "/v1/messages" {
		t.Errorf("headers/path = %v %q", h, s.paths[0])
	}
	body := s.bodies[0]
	if body["system"] != "sys" || body["max_tokens"] != float64(DefaultMaxTokens) {
		t.Errorf("system/max_tokens = %v %v", body["system"], body["max_tokens"])
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages = %d, want 3 (user, assistant, user with tool_result)", len(msgs))
	}
	use := msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)
	if use["type"] != "tool_use" || use["id"] != "c1" {
		t.Errorf("assistant block = %v, want tool_use c1", use)
	}
	res := msgs[2].(map[string]any)
	blk := res["content"].([]any)[0].(map[string]any)
	if res["role"] != "user" || blk["type"] != "tool_result" || blk["tool_use_id"] != "c1" || blk["content"] != `{"tool":"list_logs","ok":true}` {
		t.Errorf("tool result message = %v", res)
	}
	tool := body["tools"].([]any)[0].(map[string]any)
	if tool["name"] != "list_logs" || tool["input_schema"] == nil {
		t.Errorf("tools[0] = %v", tool)
	}
}

func TestAnthropicRetriesOverloaded(t *testing.T) {
	c, _, rs := newAnthropic(t,
		canned{429, "1", `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`},
		canned{529, "", `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`},
		canned{200, "", `{"type":"message","content":[{"type":"text","text":"All good."}],"stop_reason":"end_turn"}`})
	got, err := c.Complete(context.Background(), testReq)
	if err != nil {
		t.Fatal(err)
	}
	if got.Message.Content != "All good." || len(got.Message.ToolCalls) != 0 {
		t.Errorf("reply = %+v", got)
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; !cmp.Equal(rs.waits, want) {
		t.Errorf("waits = %v, want %v", rs.waits, want)
	}
}

func TestAnthropicErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply canned
		check func(error) bool
	}{
		{"401", canned{401, "", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}, func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Status == 401 && ae.Type == "authentication_error"
		}},
		{"not JSON", canned{200, "", `{"content":`}, isMalformed},
		{"error type on 200", canned{200, "", `{"type":"error","error":{}}`}, isMalformed},
		{"no blocks", canned{200, "", `{"type":"message","content":[]}`}, isMalformed},
		{"tool_use without id", canned{200, "", `{"type":"message","content":[{"type":"tool_use","name":"x","input":{}}]}`}, isMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := newAnthropic(t, tt.reply)
			_, err := c.Complete(context.Background(), testReq)
			if !tt.check(err) {
				t.Errorf("err = %v (%T)", err, err)
			}
		})
	}
}

func TestMockSequence(t *testing.T) {
	m := &Mock{Dir: "testdata/logs"}
	tools := []Tool{{Name: "list_logs"}, {Name: "tail_log"}, {Name: "grep_log"}}
	req := Request{Tools: tools, Messages: []Message{{Role: RoleUser, Content: "go"}}}
	results := []ToolResult{
		{Tool: "list_logs", OK: true, Result: json.RawMessage(`{"entries":[{"name":"sub","type":"dir"},{"name":"app.log","type":"file"}]}`)},
		{Tool: "tail_log", OK: true, Result: json.RawMessage(`{"lines":["x"]}`)},
		{Tool: "grep_log", OK: true, Result: json.RawMessage(`{"matches":[{"path":"testdata/logs/app.log","line":2,"text":"ERROR boom"}]}`)},
	}
	wantCalls := []string{`list_logs {"directory":"testdata/logs"}`, `tail_log {"lines":20,"path":"testdata/logs/app.log"}`, `grep_log {"path":"testdata/logs","pattern":"ERROR"}`}
	for i := 0; i < 4; i++ {
		r, err := m.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if want := "Found 1 line(s) containing \"ERROR\":\n- testdata/logs/app.log:2: ERROR boom"; r.Message.Content != want || len(r.Message.ToolCalls) != 0 {
				t.Errorf("final = %q, want %q", r.Message.Content, want)
			}
			break
		}
		tc := r.Message.ToolCalls[0]
		if got := tc.Name + " " + string(tc.Args); got != wantCalls[i] {
			t.Errorf("turn %d = %s, want %s", i, got, wantCalls[i])
		}
		req.Messages = append(req.Messages, r.Message, Message{Role: RoleTool, ToolCallID: tc.ID, Content: results[i].Encode()})
	}
}
