package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{7}, 99, 7},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p95 of 1..100", hundred, 95, 95 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 of 1..100", hundred, 100, 100 * time.Millisecond},
		{"p99 of 1..10 is the largest", hundred[:10], 99, 10 * time.Millisecond},
		{"p0 is the smallest", hundred, 0, time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: percentile(%d values, %v) = %v, want %v", tc.name, len(tc.sorted), tc.p, got, tc.want)
		}
	}
}

func TestSampleAdd(t *testing.T) {
	var s sample
	s.add(sample{Concurrency: 2, Lat: []time.Duration{3, 1}, Elapsed: time.Second})
	s.add(sample{Concurrency: 2, Lat: []time.Duration{2, 4}, Elapsed: time.Second})
	got := s.summary()
	want := summary{Concurrency: 2, N: 4, Rate: 2, Mean: 2, P50: 2, P95: 4, P99: 4, Max: 4}
	if got != want {
		t.Errorf("summary of two rounds = %+v, want %+v", got, want)
	}
}

// TestModes runs each mode with a handful of operations through the real
// binary and checks that it prints its figures; it asserts nothing about
// their values. linux_sandbox needs root.
func TestModes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agent-runner and starts servers")
	}
	modes := []string{"local_process", "remote"}
	tasks := []string{"local_process"}
	if os.Geteuid() == 0 {
		modes = append(modes, "linux_sandbox")
		tasks = append(tasks, "linux_sandbox")
	} else {
		t.Log("not root: linux_sandbox mode and tasks skipped")
	}
	if _, err := exec.LookPath("git"); err == nil {
		modes = append(modes, "task")
	} else {
		t.Log("git not installed: task mode skipped")
	}
	var out bytes.Buffer
	err := run(config{
		Modes: modes, Jobs: 4, Levels: []int{2}, Workers: 2, Queued: 20,
		Tasks: 2, TaskLevels: []int{2}, TaskBackends: tasks, TaskPoll: 10 * time.Millisecond,
		Remote: "local_process", Rounds: 2, StoreBase: t.TempDir(), Timeout: 20 * time.Second, Out: &out,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wants := []string{"== local_process: /bin/true jobs", "with 20 jobs queued", "jobs/s", "p95", "p99"}
	for _, m := range modes[1:] {
		switch m {
		case "linux_sandbox":
			wants = append(wants, "== linux_sandbox: /bin/true jobs")
		case "task":
			for _, kind := range tasks {
				wants = append(wants, "== task ("+kind+")")
			}
		case "remote":
			wants = append(wants, "== remote (local_process)", "remote worker minus own workers", "worker RSS")
		}
	}
	for _, w := range wants {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}
