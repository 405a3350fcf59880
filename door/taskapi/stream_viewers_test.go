package taskapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/door/taskapi"
)

// bigLog appends size bytes of 1000-byte lines to a finished task's
// stdout.log, then a last line without a newline; it returns the number
// of lines appended (that last one included) and the last line.
func bigLog(t *testing.T, path string, size int) (int, string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	pad := strings.Repeat("x", 1000-len("flood 0000000 ")-1)
	n := 0
	for written := 0; written < size; written += 1000 {
		fmt.Fprintf(w, "flood %07d %s\n", n, pad)
		n++
	}
	last := "last line, no newline"
	w.WriteString(last)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return n + 1, last
}

// heapNow is the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestLateViewersOfABigLogDoNotGrowTheHeap: four late viewers of a
// finished task with a 50 MB log, each stalled after its first message
// (a slow browser), cost serve a small bounded heap (each reads the log
// from its own offset as its connection accepts, not the backlog at
// once); read to the end, each gets every line, the unterminated last one
// included, and the terminal state change only after the last output,
// in lines or in chunks.
func TestLateViewersOfABigLogDoNotGrowTheHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 50 MB log")
	}
	base, origin, s := setupWith(t, nil)
	const id = "big-log"
	resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest(id, origin, "")))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit = %v %v", resp, err)
	}
	waitState(t, base, id, "completed")
	added, last := bigLog(t, filepath.Join(s.Dir(id), "outbox", "progress", "stdout.log"), 50<<20)

	before := heapNow()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const viewers = 4
	conns := make([]*websocket.Conn, viewers)
	for i := range conns {
		// Odd viewers read the output in chunks (?output=chunks).
		url := "ws" + strings.TrimPrefix(base, "http") + "/ws/tasks/" + id + "/stream"
		if i%2 == 1 {
			url += "?output=chunks"
		}
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		c.SetReadLimit(8 << 20)
		if _, _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	// The viewers stall; serve sends what their sockets take and waits.
	time.Sleep(2 * time.Second)
	grown := int64(heapNow()) - int64(before)
	t.Logf("heap growth with %d stalled viewers of a 50 MB log: %d KiB (%d KiB per viewer)", viewers, grown>>10, grown/viewers>>10)
	if limit := int64(viewers * 4 << 20); grown > limit {
		t.Errorf("heap grew %d MiB with %d stalled viewers, want at most %d MiB (4 MiB per viewer)", grown>>20, viewers, limit>>20)
	}

	// The viewers now read to the end at once: read one after another, the
	// last ones would stall past serve's 30 s write timeout on a slow
	// (race-instrumented, loaded) machine and be dropped, as they should.
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { readViewer(t, ctx, i, c, added, last) })
	}
	wg.Wait()
}

// TestLogsCompletedComesAfterTheLastLine: the SSE logs of a finished task
// end with every line, an unterminated last one included, then
// completed.
func TestLogsCompletedComesAfterTheLastLine(t *testing.T) {
	base, origin, s := setupWith(t, nil)
	const id = "sse-order"
	resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest(id, origin, "")))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit = %v %v", resp, err)
	}
	waitState(t, base, id, "completed")
	f, err := os.OpenFile(filepath.Join(s.Dir(id), "outbox", "progress", "stderr.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("no newline at the end")
	f.Close()
	resp, err = http.Get(base + "/api/v1/tasks/" + id + "/logs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			var d struct{ Line string }
			json.Unmarshal([]byte(v), &d)
			events = append(events, event+":"+d.Line)
		}
	}
	if len(events) < 2 {
		t.Fatalf("events = %q", events)
	}
	want := []string{"stderr:no newline at the end", "completed:"}
	if diff := cmp.Diff(want, events[len(events)-2:]); diff != "" {
		t.Errorf("last events (-want +got):\n%s", diff)
	}
}

// readViewer reads one viewer's stream to its end and checks it holds
// every line and ends with the output, then completed.
func readViewer(t *testing.T, ctx context.Context, i int, c *websocket.Conn, added int, last string) {
	var order []string // output (stdout lines collapsed) and state changes
	lines := 0
	var lastText string
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Errorf("viewer %d: %v", i, err)
				return
			}
			break
		}
		var m taskapi.StreamMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Error(err)
			return
		}
		switch m.Type {
		case "output":
			if m.Stream == "stdout" {
				lines += max(m.Lines, 1)
				lastText = m.Text[strings.LastIndexByte(m.Text, '\n')+1:]
			}
			if len(order) == 0 || order[len(order)-1] != "output" {
				order = append(order, "output")
			}
		case "state_change":
			order = append(order, string(m.To))
		}
	}
	if lines < added || lastText != last {
		t.Errorf("viewer %d: %d stdout lines ending %.40q, want at least %d ending %q", i, lines, lastText, added, last)
	}
	if got := order[len(order)-2:]; !cmp.Equal(got, []string{"output", "completed"}) {
		t.Errorf("viewer %d: stream ends %q, want the output, then completed", i, got)
	}
}
