package taskapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sseLine is one line event of a task's logs stream.
type sseLine struct{ ID, Event, Line string }

// readLogs reads a task's SSE logs to the end, resuming after lastID when
// it is not empty, and returns the line events and the status.
func readLogs(t *testing.T, base, id, lastID string) ([]sseLine, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/tasks/"+id+"/logs", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []sseLine
	var cur sseLine
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d struct{ Line string }
			json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d)
			cur.Line = d.Line
		case line == "":
			if cur.Event == "stdout" || cur.Event == "stderr" {
				out = append(out, cur)
			}
			cur = sseLine{}
		}
	}
	return out, resp.StatusCode
}

// TestLogsResumeFromLastEventID: a viewer that reconnects with the id of
// the last line it got reads on from the next one, in both logs, with no
// gap and no repeat (the stream had no ids: a reconnect read everything
// again).
func TestLogsResumeFromLastEventID(t *testing.T) {
	base, origin, s := setupWith(t, nil)
	const id = "sse-resume"
	resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest(id, origin, "")))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit = %v %v", resp, err)
	}
	waitState(t, base, id, "completed")
	progress := filepath.Join(s.Dir(id), "outbox", "progress")
	for _, name := range []string{"stdout.log", "stderr.log"} {
		f, err := os.OpenFile(filepath.Join(progress, name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			fmt.Fprintf(f, "%s line %d with some text to make it longer\n", name, i)
		}
		f.Close()
	}
	all, code := readLogs(t, base, id, "")
	if code != 200 || len(all) < 600 {
		t.Fatalf("whole stream: %d events, status %d", len(all), code)
	}
	for _, cut := range []int{0, 1, 299, 300, 450, len(all) - 2} {
		rest, _ := readLogs(t, base, id, all[cut].ID)
		if diff := cmp.Diff(all[cut+1:], rest); diff != "" {
			t.Errorf("resumed after event %d (id %s) (-want +got):\n%s", cut, all[cut].ID, diff)
		}
	}
	if last, _ := readLogs(t, base, id, all[len(all)-1].ID); len(last) != 0 {
		t.Errorf("resumed after the last line: %d more lines, want none", len(last))
	}
	if _, code := readLogs(t, base, id, "garbage"); code != 422 {
		t.Errorf("a malformed Last-Event-ID = %d, want 422", code)
	}
}
