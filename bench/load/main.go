// Command load measures the HTTP service: it builds agent-runner, starts
// `serve` on loopback, and prints jobs/second and p50/p99
// submit-to-terminal latency for /bin/true on local_process at several
// concurrencies, then the server's RSS idle and with 10,000 jobs queued.
//
//	go run ./bench/load [-jobs 2000] [-queued 10000] [-store DIR]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/client"
)

func main() {
	jobs := flag.Int("jobs", 2000, "jobs per concurrency level")
	queued := flag.Int("queued", 10000, "jobs queued for the RSS measurement")
	storeBase := flag.String("store", "", "base directory for stores (default: a temp dir)")
	workers := flag.Int("workers", 4, "server workers")
	levels := flag.String("levels", "1,16,64", "concurrency levels")
	serverArgs := flag.String("server-args", "", "extra serve flags, space separated (e.g. --pprof-addr 127.0.0.1:6060)")
	flag.Parse()

	dir, err := os.MkdirTemp(*storeBase, "ar-load-")
	check(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "agent-runner")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/agent-runner").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	ws := filepath.Join(dir, "ws")
	check(os.MkdirAll(ws, 0o755))
	check(os.WriteFile(filepath.Join(ws, "README"), []byte("tiny\n"), 0o644))
	body, _ := json.Marshal(map[string]any{
		"workspace": map[string]any{"path": ws},
		"command":   map[string]any{"argv": []string{"/bin/true"}},
		"policy":    map[string]any{"allowed_commands": []string{"true"}},
	})

	args := append([]string{"--workers", strconv.Itoa(*workers), "--queue-capacity", "100000"}, strings.Fields(*serverArgs)...)
	srv, c := start(bin, filepath.Join(dir, "store-run"), args...)
	fmt.Printf("server: %d workers, store on %s, %d jobs per level\n\n", *workers, dir, *jobs)
	fmt.Printf("%-12s %10s %10s %10s\n", "concurrency", "jobs/s", "p50", "p99")
	for _, f := range strings.Split(*levels, ",") {
		conc, err := strconv.Atoi(f)
		check(err)
		rate, p50, p99 := level(c, body, conc, *jobs)
		fmt.Printf("%-12d %10.0f %10s %10s\n", conc, rate, ms(p50), ms(p99))
	}
	stop(srv)
	if *queued == 0 {
		return
	}

	srv, c = start(bin, filepath.Join(dir, "store-queue"), "--no-workers", "--queue-capacity", strconv.Itoa(*queued+10))
	idle := rss(srv.Process.Pid)
	var wg sync.WaitGroup
	next := make(chan struct{})
	go func() {
		for i := 0; i < *queued; i++ {
			next <- struct{}{}
		}
		close(next)
	}()
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				_, err := c.Submit(context.Background(), body)
				check(err)
			}
		}()
	}
	wg.Wait()
	full := rss(srv.Process.Pid)
	stop(srv)
	fmt.Printf("\nserver RSS idle: %d MB; with %d jobs queued: %d MB (goal < 100 MB)\n", idle>>20, *queued, full>>20)
}

// level runs n jobs at the given concurrency, each submitted and then
// polled until terminal, and returns jobs/s and latency percentiles.
func level(c *client.Client, body []byte, conc, n int) (float64, time.Duration, time.Duration) {
	lat := make([]time.Duration, n)
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t := time.Now()
				acc, err := c.Submit(context.Background(), body)
				check(err)
				res, err := c.Wait(context.Background(), acc.JobID, 2*time.Millisecond)
				check(err)
				if res.Status != "completed" {
					fmt.Fprintf(os.Stderr, "job %s: %s\n", acc.JobID, res.Status)
					os.Exit(1)
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return float64(n) / elapsed.Seconds(), lat[n/2], lat[n*99/100]
}

func start(bin, store string, extra ...string) (*exec.Cmd, *client.Client) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--store-dir", store, "--log-level", "error", "--workspace-root", filepath.Dir(store)}, extra...)...)
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	c := client.New("http://"+addr, "")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := c.Get(context.Background(), "job_probe"); err != nil && strings.Contains(err.Error(), "not_found") {
			return cmd, c
		}
	}
	fmt.Fprintln(os.Stderr, "server did not start")
	os.Exit(1)
	return nil, nil
}

func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
}

func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}
