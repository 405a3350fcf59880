// Command sessions measures kept sandboxes (docs/sessions.md) through
// the built binary: it builds agent-runner, starts `serve` on loopback
// (linux_sandbox, a template "bench" with a warm pool and a template
// "cold" of the same shape without one) and prints, from one run:
//
//   - create-to-first-exec-done (POST /v1/sandboxes, then an exec of
//     true, answered) p50 and p99 from the warm pool and cold, against a
//     linux_sandbox job of true (POST /v1/jobs, long-polled to its
//     result), the three interleaved iteration by iteration so that they
//     share the load, with their ratios;
//   - -conc concurrent creates (each to its 201) p50 and p99, warm and
//     cold, on a serve whose pool holds -conc;
//   - the CPU serve and every process below it use while -idle paused
//     sandboxes (and a pool of as many frozen ones) sit for -idle-for,
//     beside a serve with none.
//
// Run from the repository root, as root (linux_sandbox):
//
//	go run ./bench/sessions [-n 50] [-conc 100] [-idle 16] [-idle-for 10s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/agent-runner/agent-runner/bench/internal/benchserve"
)

// config is what one run measures.
type config struct {
	N       int           // sequential iterations of warm, cold and job
	Conc    int           // concurrent creates
	Idle    int           // paused sandboxes of the idle measurement
	IdleFor time.Duration // how long they sit
	Bin     string
	Dir     string
	WS      string
}

func main() {
	var c config
	flag.IntVar(&c.N, "n", 50, "sequential iterations of warm, cold and job")
	flag.IntVar(&c.Conc, "conc", 100, "concurrent creates")
	flag.IntVar(&c.Idle, "idle", 16, "paused sandboxes of the idle CPU measurement")
	flag.DurationVar(&c.IdleFor, "idle-for", 10*time.Second, "how long the idle sandboxes sit")
	flag.StringVar(&c.Bin, "bin", "", "agent-runner binary (default: build ./cmd/agent-runner)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sessions:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	dir, err := os.MkdirTemp("", "ar-sessions-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	c.Dir, c.WS = dir, filepath.Join(dir, "ws")
	if err := os.Mkdir(c.WS, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.WS, "README"), []byte("tiny\n"), 0o644); err != nil {
		return err
	}
	if c.Bin == "" {
		if c.Bin, err = benchserve.Build(dir); err != nil {
			return err
		}
	}
	fmt.Printf("bench/sessions: %d CPUs, load %s, linux_sandbox through `agent-runner serve`\n\n", runtime.NumCPU(), loadavg())
	if err := firstExec(c); err != nil {
		return err
	}
	if err := concurrentCreates(c); err != nil {
		return err
	}
	return idleCPU(c)
}

// templates writes a templates file: "bench" with a pool of size, "cold"
// of the same shape without one.
func templates(c config, size int) (string, error) {
	p := filepath.Join(c.Dir, "templates-"+strconv.Itoa(size)+".json")
	body := fmt.Sprintf(`{"bench": {"timeout_s": 600, "pool": %d}, "cold": {"timeout_s": 600}}`, size)
	return p, os.WriteFile(p, []byte(body), 0o644)
}

// poolServe starts serve with a pool of size, refilled only after an
// hour without claims (so that refills never run under a measurement).
func poolServe(c config, size int) (*server, error) {
	tpl, err := templates(c, size)
	if err != nil {
		return nil, err
	}
	return startServe(c.Bin, c.Dir, max(size, 8), "--sandbox-templates", tpl, "--sandbox-pool-refill-delay", "1h",
		"--max-sandboxes", strconv.Itoa(3*size+8))
}

// firstExec measures create-to-first-exec-done warm and cold, and a
// job, interleaved.
func firstExec(c config) error {
	s, err := poolServe(c, c.N)
	if err != nil {
		return err
	}
	defer s.Stop()
	ctx := context.Background()
	session := func(template, start string) (time.Duration, error) {
		t := time.Now()
		sb, err := s.create(ctx, map[string]any{"template": template}, start)
		if err == nil {
			err = s.exec(ctx, sb.ID, "true")
		}
		d := time.Since(t)
		if err != nil {
			return 0, err
		}
		return d, s.remove(ctx, sb.ID)
	}
	var warm, cold, jobs []time.Duration
	for range c.N {
		d, err := session("bench", "warm")
		if err != nil {
			return err
		}
		warm = append(warm, d)
		if d, err = session("cold", "cold"); err != nil {
			return err
		}
		cold = append(cold, d)
		t := time.Now()
		if err := s.runJob(ctx, c.WS, "true"); err != nil {
			return err
		}
		jobs = append(jobs, time.Since(t))
	}
	w, k, j := quantilesOf(warm), quantilesOf(cold), quantilesOf(jobs)
	fmt.Printf("create to first exec done (%d each, interleaved; load %s)\n", c.N, loadavg())
	fmt.Printf("  %-24s p50 %10s  p99 %10s  p99/p50 %.2f\n", "warm (pool)", ms(w.P50), ms(w.P99), ratio(w.P99, w.P50))
	fmt.Printf("  %-24s p50 %10s  p99 %10s  p99/p50 %.2f\n", "cold", ms(k.P50), ms(k.P99), ratio(k.P99, k.P50))
	fmt.Printf("  %-24s p50 %10s  p99 %10s  p99/p50 %.2f\n", "linux_sandbox job", ms(j.P50), ms(j.P99), ratio(j.P99, j.P50))
	fmt.Printf("  warm/cold p50 %.2f  warm/job p50 %.2f  cold/job p50 %.2f\n", ratio(w.P50, k.P50), ratio(w.P50, j.P50), ratio(k.P50, j.P50))
	fmt.Printf("  goals: warm p50 <= 50 ms: %v; warm p99 <= 2x p50: %v\n\n", w.P50 <= 50*time.Millisecond, w.P99 <= 2*w.P50)
	return nil
}

// concurrentCreates measures c.Conc creates at once, warm then cold.
func concurrentCreates(c config) error {
	s, err := poolServe(c, c.Conc)
	if err != nil {
		return err
	}
	defer s.Stop()
	ctx := context.Background()
	fmt.Printf("%d concurrent creates (each to its 201)\n", c.Conc)
	var firstP50 time.Duration
	for _, mode := range []struct{ template, start string }{{"bench", "warm"}, {"cold", "cold"}} {
		ids := make([]string, c.Conc)
		lat, err := concurrent(c.Conc, func(i int) error {
			sb, err := s.create(ctx, map[string]any{"template": mode.template}, mode.start)
			ids[i] = sb.ID
			return err
		})
		if err != nil {
			return err
		}
		q := quantilesOf(lat)
		load := loadavg()
		for _, id := range ids {
			if err := s.remove(ctx, id); err != nil {
				return err
			}
		}
		fmt.Printf("  %-24s p50 %10s  p99 %10s  (load %s)\n", mode.start, ms(q.P50), ms(q.P99), load)
		if firstP50 == 0 {
			firstP50 = q.P50
		} else {
			fmt.Printf("  warm/cold p50 %.2f\n", ratio(firstP50, q.P50))
		}
	}
	fmt.Printf("  goal: %d concurrent creates p50 <= 300 ms (warm: %v)\n\n", c.Conc, firstP50 <= 300*time.Millisecond)
	return nil
}

// idleCPU measures the CPU serve and its processes use while sandboxes
// sit paused, beside a serve with none.
func idleCPU(c config) error {
	ctx := context.Background()
	measure := func(s *server) time.Duration {
		before := treeCPU(s.Pid())
		time.Sleep(c.IdleFor)
		return treeCPU(s.Pid()) - before
	}
	bare, err := startServe(c.Bin, c.Dir, 8)
	if err != nil {
		return err
	}
	none := measure(bare)
	bare.Stop()
	s, err := poolServe(c, c.Idle)
	if err != nil {
		return err
	}
	defer s.Stop()
	for range c.Idle {
		sb, err := s.create(ctx, map[string]any{"template": "cold"}, "cold")
		if err != nil {
			return err
		}
		if err := s.exec(ctx, sb.ID, "true"); err != nil {
			return err
		}
		if err := s.call(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil, 200, nil); err != nil {
			return err
		}
	}
	paused := measure(s)
	fmt.Printf("idle CPU over %s (serve and every process below it; load %s)\n", c.IdleFor, loadavg())
	fmt.Printf("  %-40s %s\n", "serve, no sandbox", ms(none))
	fmt.Printf("  %-40s %s\n", fmt.Sprintf("serve, %d paused + %d pooled (frozen)", c.Idle, c.Idle), ms(paused))
	fmt.Printf("  difference: %s for %d sandboxes over %s (/proc counts CPU in 10 ms ticks)\n", ms(paused-none), 2*c.Idle, c.IdleFor)
	return nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
