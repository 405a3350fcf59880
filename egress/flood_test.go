package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// floodRun is a gateway serving one run on a Unix socket, as a sandbox's
// bridge, that keeps every record and log line and counts the lookups
// its resolver is asked for.
type floodRun struct {
	g       *Gateway
	sock    string
	logs    *syncBuffer
	lookups atomic.Int64

	mu      sync.Mutex
	records []Decision

	cancel context.CancelFunc
	done   chan error
}

// startFlood serves rules with cfg; every lookup fails (no such host).
func startFlood(t *testing.T, cfg Config, rules []string) *floodRun {
	t.Helper()
	f := &floodRun{logs: &syncBuffer{}, sock: filepath.Join(t.TempDir(), "egress.sock"), done: make(chan error, 1)}
	cfg.Logger = slog.New(slog.NewJSONHandler(f.logs, nil))
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.lookup = func(context.Context, string) ([]netip.Addr, error) {
		f.lookups.Add(1)
		return nil, errText("no such host")
	}
	f.g = g
	rs, err := ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	run := &Run{ID: "job-1", Rules: rs, Audit: func(d Decision) {
		f.mu.Lock()
		f.records = append(f.records, d)
		f.mu.Unlock()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.done <- g.Serve(ctx, ln, run, nil) }()
	t.Cleanup(func() { f.end(t) })
	return f
}

// connect sends CONNECT target and returns the answer's status.
func (f *floodRun) connect(target string) (int, error) {
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // generous: CI runs packages side by side on 2 cores
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// end stops the run (once) and returns its records.
func (f *floodRun) end(t *testing.T) []Decision {
	t.Helper()
	if f.cancel != nil {
		f.cancel()
		f.cancel = nil
		select {
		case err := <-f.done:
			if err != nil {
				t.Errorf("Serve = %v, want nil after cancel", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return within 10s of cancel")
		}
	}
	return f.snapshot()
}

func (f *floodRun) snapshot() []Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Decision(nil), f.records...)
}

// logLines decodes the log, one map per line.
func (f *floodRun) logLines(t *testing.T) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// A job that opens 6000 refused connections, half to one host and half to
// as many hosts, gets a bounded number of records (events are made of the
// same records), whose counts still add up to 6000, and two log lines;
// none of the names reaches the resolver.
func TestRefusalFloodIsBounded(t *testing.T) {
	const n = 6000
	f := startFlood(t, Config{SummaryInterval: time.Hour}, []string{"*.allowed.test"})
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				target := "evil.test:443"
				if i%2 == 1 {
					target = "d" + strconv.Itoa(int(i)) + ".exfil.test:443"
				}
				status, err := f.connect(target)
				if err != nil || status != http.StatusForbidden {
					t.Errorf("CONNECT %s = %d, %v; want 403", target, status, err)
					if err != nil {
						// Seen twice under a loaded full suite, never alone:
						// say where the gateway's goroutines stand.
						dumpGoroutines(t)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	records := f.end(t)

	var one, summaries []Decision
	var counted int64
	for _, d := range records {
		if d.Allowed || d.Rule != ReasonNotAllowed {
			t.Errorf("record %+v, want a not_allowed refusal or summary", d)
		}
		if d.Mode == ModeSummary {
			summaries = append(summaries, d)
			counted += d.Count
			if d.Last.Before(d.Time) || d.Time.IsZero() {
				t.Errorf("summary %+v: last before first", d)
			}
			continue
		}
		one = append(one, d)
	}
	if got, want := len(one), DefaultMaxRefusalRecords; got != want {
		t.Errorf("%d refusals recorded one by one, want %d (DefaultMaxRefusalRecords)", got, want)
	}
	if got, max := len(summaries), maxSummaryKeys+1; got > max || got == 0 {
		t.Errorf("%d summary records, want 1 to %d", got, max)
	}
	if got, want := int64(len(one))+counted, int64(n); got != want {
		t.Errorf("refusals recorded %d + summarized %d = %d, want %d", len(one), counted, got, want)
	}
	perHost := map[string]int64{}
	for _, d := range one {
		perHost[d.Host]++
	}
	if got, want := perHost["evil.test"], int64(DefaultRefusalsPerKey); got != want {
		t.Errorf("%d refusals of evil.test recorded one by one, want %d", got, want)
	}
	for _, d := range summaries {
		if d.Host == "evil.test" {
			if got, want := d.Count, int64(n/2-DefaultRefusalsPerKey); got != want {
				t.Errorf("evil.test summary count = %d, want %d", got, want)
			}
			if got, want := d.Port, 443; got != want {
				t.Errorf("evil.test summary port = %d, want %d", got, want)
			}
			perHost["summary"]++
		}
	}
	if perHost["summary"] != 1 {
		t.Errorf("%d summaries of evil.test, want 1: %+v", perHost["summary"], summaries)
	}
	if got := testutil.ToFloat64(f.g.metrics.conns.WithLabelValues(ReasonNotAllowed)); got != n {
		t.Errorf("not_allowed metric = %v, want %d (every refusal)", got, n)
	}
	if got := f.lookups.Load(); got != 0 {
		t.Errorf("%d lookups for names no rule matches, want 0", got)
	}

	lines := f.logLines(t)
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2 (the first refusal, the run's counts): %v", len(lines), lines)
	}
	last := map[string]any{}
	for k, v := range lines[1]["egress"].(map[string]any) {
		last[k] = v
	}
	want := map[string]any{"run": "job-1", "refused": float64(n), "recorded": float64(DefaultMaxRefusalRecords),
		"summarized": float64(n - DefaultMaxRefusalRecords), "unlogged": float64(n - 1)}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("last log line (-want +got):\n%s", diff)
	}
}

// Summaries are written while the run goes on, every SummaryInterval,
// with the refusals counted since the previous one; nothing is left for
// the end when nothing was refused since.
func TestRefusalSummariesArePeriodic(t *testing.T) {
	f := startFlood(t, Config{SummaryInterval: 50 * time.Millisecond, RefusalsPerKey: 1}, []string{"*.allowed.test"})
	for range 3 {
		if status, err := f.connect("evil.test:443"); err != nil || status != http.StatusForbidden {
			t.Fatalf("CONNECT = %d, %v; want 403", status, err)
		}
	}
	summarized := func(ds []Decision) (n int64) {
		for _, d := range ds {
			if d.Mode == ModeSummary {
				n += d.Count
			}
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Second)
	for summarized(f.snapshot()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := f.snapshot()
	if got, want := summarized(before), int64(2); got != want {
		t.Fatalf("summaries count %d refusals while the run goes on, want %d: %+v", got, want, before)
	}
	if diff := cmp.Diff(before, f.end(t)); diff != "" {
		t.Errorf("records written at the end with nothing pending (-before +after):\n%s", diff)
	}
}

var dumpOnce sync.Once

// dumpGoroutines logs every goroutine's stack once.
func dumpGoroutines(t *testing.T) {
	dumpOnce.Do(func() {
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 2)
		t.Logf("goroutines at the stalled CONNECT:\n%s", b.String())
	})
}
