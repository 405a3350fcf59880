package egress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// The file never passes its cap, a part an earlier writer left included;
// its last line is the ModeTruncated mark and every line is a Decision.
func TestAuditLogByteCap(t *testing.T) {
	for _, tc := range []struct {
		name          string
		max, existing int64
		wantSome      bool // decisions before the mark
	}{
		{"fresh file", 8 << 10, 0, true},
		{"an earlier writer's part counts", 8 << 10, 6 << 10, true},
		{"no room for a decision, room for the mark", 600, 0, false},
		{"no room for the mark either", 100, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "egress.jsonl")
			if tc.existing > 0 {
				pad := `{"run":"job_1","host":"` + strings.Repeat("x", int(tc.existing)-len(`{"run":"job_1","host":""}`)-1) + `"}` + "\n"
				if err := os.WriteFile(path, []byte(pad), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l := NewAuditLogMax(path, tc.max)
			for i := range 1000 {
				if err := l.Write(Decision{Run: "job_1", Host: "h.example", Port: 443, Mode: ModeTunnel, Allowed: true, Rule: "h.example", BytesUp: int64(i)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) && tc.max < markReserve {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := int64(len(raw)); got > tc.max {
				t.Errorf("file is %d bytes, want at most %d", got, tc.max)
			}
			var ds []Decision
			for sc := bufio.NewScanner(bytes.NewReader(raw)); sc.Scan(); {
				var d Decision
				if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				ds = append(ds, d)
			}
			if tc.existing > 0 {
				ds = ds[1:]
			}
			if tc.max < markReserve {
				if len(ds) != 0 {
					t.Errorf("%d lines in a file capped below the mark's room, want 0", len(ds))
				}
				return
			}
			if len(ds) == 0 {
				t.Fatal("no line, want at least the mark")
			}
			mark := ds[len(ds)-1]
			if mark.Mode != ModeTruncated || mark.Rule != RuleTruncated || mark.Run != "job_1" {
				t.Errorf("last line %+v, want the %s mark of job_1", mark, ModeTruncated)
			}
			if got := len(ds) > 1; got != tc.wantSome {
				t.Errorf("decisions before the mark: %v, want %v (%d lines)", got, tc.wantSome, len(ds))
			}
			for i, d := range ds[:len(ds)-1] {
				if d.BytesUp != int64(i) {
					t.Fatalf("line %d is decision %d, want the decisions in order from the first", i, d.BytesUp)
				}
			}
		})
	}
}
