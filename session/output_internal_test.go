package session

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOutputBuffer: the buffer keeps the newest bytes within its limit,
// in write order across streams; a reader from an offset it dropped is
// told how many bytes it missed, and one that resumes inside a write
// gets the rest of it.
func TestOutputBuffer(t *testing.T) {
	o := newOutput(6)
	o.add("stdout", []byte("abc"))
	o.add("stderr", []byte("de"))
	o.add("stdout", []byte("fgh"))
	o.add("stdout", []byte("0123456789"))
	o.close()
	tests := []struct {
		from int64
		want Read
	}{
		{0, Read{From: 0, Missed: 12, Chunks: []Chunk{{Stream: "stdout", Offset: 12, Data: []byte("456789")}}, Done: true}},
		{14, Read{From: 14, Chunks: []Chunk{{Stream: "stdout", Offset: 14, Data: []byte("6789")}}, Done: true}},
		{18, Read{From: 18, Done: true}},
	}
	for _, tt := range tests {
		got, err := o.next(context.Background(), tt.from)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("next(%d) (-want +got):\n%s", tt.from, diff)
		}
	}
	p := newOutput(6)
	p.add("stdout", []byte("abc"))
	p.add("stderr", []byte("de"))
	p.add("stdout", []byte("fg"))
	got, _ := p.next(context.Background(), 1)
	want := Read{From: 1, Missed: 2, Chunks: []Chunk{{Stream: "stderr", Offset: 3, Data: []byte("de")}, {Stream: "stdout", Offset: 5, Data: []byte("fg")}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("next(1) after the first write was dropped (-want +got):\n%s", diff)
	}
}
