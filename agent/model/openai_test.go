package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scripted is an httptest handler that answers each request with the next
// canned (status, header, body) and records the request bodies.
type scripted struct {
	mu      sync.Mutex
	replies []canned
	bodies  []map[string]any
	headers []http.Header
	paths   []string
}

type canned struct {
	status     int
	retryAfter string
	body       string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	s.bodies = append(s.bodies, m)
	s.headers = append(s.headers, r.Header.Clone())
	s.paths = append(s.paths, r.URL.Path)
	if len(s.replies) == 0 {
		http.Error(w, "no more replies", http.StatusTeapot)
		return
	}
	c := s.replies[0]
	s.replies = s.replies[1:]
	if c.retryAfter != "" {
		w.Header().Set("Retry-After", c.retryAfter)
	}
	w.WriteHeader(c.status)
	io.WriteString(w, c.body)
}

// recordSleep replaces real waits between retries.
type recordSleep struct{ waits []time.Duration }

func (r *recordSleep) sleep(_ context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return nil
}

var testReq = Request{
	System: "sys",
	Messages: []Message{
		{Role: RoleUser, Content: "look at logs"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "list_logs", Args: json.RawMessage(`{"directory":"logs"}`)}}},
		{Role: RoleTool, ToolCallID: "c1", ToolName: "list_logs", Content: `{"tool":"list_logs","ok":true}`},
	},
	Tools: []Tool{{Name: "list_logs", Description: "list", InputSchema: json.RawMessage(`{"type":"object"}`)}},
}

func newOpenAI(t *testing.T, replies ...canned) (*OpenAI, *scripted, *recordSleep) {
	s := &scripted{replies: replies}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	rs := &recordSleep{}
	return &OpenAI{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "m", Sleep: rs.sleep}, s, rs
}

func TestOpenAIToolCall(t *testing.T) {
	c, s, _ := newOpenAI(t, canned{200, "", `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"tail_log","arguments":"{\"path\":\"logs/a.log\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":11,"completion_tokens":5}}`})
	got, err := c.Complete(context.Background(), testReq)
	if err != nil {
		t.Fatal(err)
	}
	want := Reply{StopReason: "tool_calls", Usage: Usage{11, 5}, Message: Message{Role: RoleAssistant,
		ToolCalls: []ToolCall{{ID: "call_9", Name: "tail_log", Args: json.RawMessage(`{"path":"logs/a.log"}`)}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reply (-want +got):\n%s", diff)
	}
	if got, want := s.paths[0], "/v1/chat/completions"; got != want {
		t.Errorf("path = %q, want %q", got, want)
	}
	if got, want := s.headers[0].Get("Authorization"), "Bearer sk-test"; got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	msgs := s.bodies[0]["messages"].([]any)
	wantRoles := []string{"system", "user", "assistant", "tool"}
	for i, m := range msgs {
		if got := m.(map[string]any)["role"]; got != wantRoles[i] {
			t.Errorf("message %d role = %v, want %s", i, got, wantRoles[i])
		}
	}
	tool := msgs[3].(map[string]any)
	if tool["tool_call_id"] != "c1" || tool["content"] != `{"tool":"list_logs","ok":true}` {
		t.Errorf("tool message = %v, want the result as data with tool_call_id c1", tool)
	}
	call := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if call["arguments"] != `{"directory":"logs"}` {
		t.Errorf("assistant tool call arguments = %v, want a JSON string", call["arguments"])
	}
	tools := s.bodies[0]["tools"].([]any)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "list_logs" || fn["parameters"] == nil {
		t.Errorf("tools[0] = %v", tools[0])
	}
}

func TestOpenAIRetriesRateLimit(t *testing.T) {
	c, s, rs := newOpenAI(t,
		canned{429, "2", `{"error":{"message":"slow down","type":"rate_limit"}}`},
		canned{503, "", `overloaded`},
		canned{200, "", `{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`})
	got, err := c.Complete(context.Background(), testReq)
	if err != nil {
		t.Fatal(err)
	}
	if got.Message.Content != "done" || len(s.bodies) != 3 {
		t.Errorf("reply %q after %d requests, want done after 3", got.Message.Content, len(s.bodies))
	}
	if want := []time.Duration{2 * time.Second, 2 * time.Second}; !cmp.Equal(rs.waits, want) {
		t.Errorf("waits = %v, want %v (Retry-After, then backoff)", rs.waits, want)
	}
}

func TestOpenAIErrors(t *testing.T) {
	tests := []struct {
		name    string
		replies []canned
		check   func(error) bool
	}{
		{"400 with error body", []canned{{400, "", `{"error":{"message":"bad model","type":"invalid_request_error"}}`}}, func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Status == 400 && ae.Message == "bad model" && ae.Type == "invalid_request_error"
		}},
		{"429 until retries run out", []canned{{429, "0", "{}"}, {429, "0", "{}"}, {429, "0", "{}"}, {429, "0", "{}"}}, func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Status == 429
		}},
		{"not JSON", []canned{{200, "", `<html>`}}, isMalformed},
		{"no choices", []canned{{200, "", `{"choices":[]}`}}, isMalformed},
		{"empty message", []canned{{200, "", `{"choices":[{"message":{"role":"assistant","content":""}}]}`}}, isMalformed},
		{"tool call without name", []canned{{200, "", `{"choices":[{"message":{"tool_calls":[{"id":"x","type":"function","function":{"arguments":"{}"}}]}}]}`}}, isMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := newOpenAI(t, tt.replies...)
			_, err := c.Complete(context.Background(), testReq)
			if !tt.check(err) {
				t.Errorf("err = %v (%T)", err, err)
			}
		})
	}
}

func isMalformed(err error) bool {
	var me *MalformedError
	return errors.As(err, &me)
}

func TestRetryWait(t *testing.T) {
	tests := []struct {
		header  string
		attempt int
		want    time.Duration
	}{
		{"", 0, time.Second},
		{"", 2, 4 * time.Second},
		{"7", 0, 7 * time.Second},
		{"3600", 0, MaxRetryWait},
		{"junk", 1, 2 * time.Second},
	}
	for _, tt := range tests {
		if got := retryWait(tt.header, tt.attempt); got != tt.want {
			t.Errorf("retryWait(%q, %d) = %v, want %v", tt.header, tt.attempt, got, tt.want)
		}
	}
}
