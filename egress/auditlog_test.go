package egress

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Concurrent writers each land one whole line; no file without a decision.
func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.jsonl")
	l := NewAuditLog(path)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a log without decisions made a file (%v)", err)
	}
	l = NewAuditLog(path)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if err := l.Write(Decision{Run: "job_1", Host: "h.example", Port: 443 + i}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	l.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ports := map[int]bool{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var d Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ports[d.Port] = true
	}
	if len(ports) != 50 {
		t.Errorf("%d distinct decisions read back, want 50", len(ports))
	}
}
