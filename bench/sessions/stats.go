package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// quantiles are the p50 and p99 of a set of latencies.
type quantiles struct{ P50, P99 time.Duration }

func quantilesOf(lat []time.Duration) quantiles {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration {
		if len(s) == 0 {
			return 0
		}
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	return quantiles{P50: at(0.50), P99: at(0.99)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// concurrent starts one n times at once and returns each one's latency
// (from the common start) and the first error.
func concurrent(n int, one func(i int) error) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			t := time.Now()
			errs[i] = one(i)
			lat[i] = time.Since(t)
		}()
	}
	close(gate)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return lat, err
		}
	}
	return lat, nil
}

// treeCPU is the CPU time (user and system) used so far by pid and every
// process below it: serve and its sandboxes' inits and processes.
func treeCPU(pid int) time.Duration {
	children := map[int][]int{}
	cpu := map[int]int64{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command (which may hold spaces).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		children[ppid] = append(children[ppid], p)
		cpu[p] = ut + st
	}
	var ticks int64
	var walk func(int)
	walk = func(p int) {
		ticks += cpu[p]
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
}

// loadavg is the 1-minute load average now.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
