package anthropicmock

import (
	"encoding/json"
	"testing"
)

func TestStopReasonDefaults(t *testing.T) {
	tests := []struct {
		name string
		turn Turn
		want string
	}{
		{"text", Turn{Blocks: []Block{Text("done")}}, "end_turn"},
		{"tool_use", Turn{Blocks: []Block{Text("writing"), ToolUse("toolu_1", "Write", map[string]string{})}}, "tool_use"},
		{"empty", Turn{}, "end_turn"},
		{"explicit", Turn{Blocks: []Block{Text("cut")}, StopReason: "max_tokens"}, "max_tokens"},
	}
	for _, tt := range tests {
		if got := tt.turn.stopReason(); got != tt.want {
			t.Errorf("%s: stopReason() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestScriptTurnFollowsTheConversation(t *testing.T) {
	s := Script{{Blocks: []Block{Text("zero")}}, {Blocks: []Block{Text("one")}}}
	tests := []struct {
		body   string
		want   string
		wantOK bool
	}{
		{`{"messages":[{"role":"user","content":"hi"}]}`, "zero", true},
		{`{"messages":[{"role":"user"},{"role":"assistant"},{"role":"user"}]}`, "one", true},
		{`{"messages":[{"role":"user"},{"role":"assistant"},{"role":"user"},{"role":"assistant"},{"role":"user"}]}`, "", false},
	}
	for _, tt := range tests {
		var req messagesRequest
		if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
			t.Fatal(err)
		}
		turn, ok := s.turn(req.assistantTurns())
		got := ""
		if ok {
			got = turn.Blocks[0].Text
		}
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("turn for %s = %q, %v; want %q, %v", tt.body, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestToolUsePanicsOnNonObjectInput(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ToolUse with a string input did not panic")
		}
	}()
	ToolUse("toolu_1", "Write", "not an object")
}

func TestCompleteMessage(t *testing.T) {
	turn := Turn{Blocks: []Block{
		Text("writing"),
		ToolUse("toolu_1", "Write", map[string]string{"file_path": "/w/a", "content": "x"}),
	}}
	got, err := json.Marshal(complete("msg_1", "claude-test", 10, turn))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",` +
		`"content":[{"type":"text","text":"writing"},{"type":"tool_use","id":"toolu_1","name":"Write","input":{"content":"x","file_path":"/w/a"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,` +
		`"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":12}}`
	if string(got) != want {
		t.Errorf("complete() =\n%s\nwant\n%s", got, want)
	}
}
