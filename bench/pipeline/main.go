// Command pipeline measures what the job pipeline costs on top of a bare
// process start, and what a workspace snapshot costs, and prints the
// figures side by side:
//
//	go run ./bench/pipeline [-n 300] [-files 10000] [-store DIR] [-cpuprofile FILE]
//
// Each round runs /bin/true once with a bare fork/exec and once as a full
// local_process job (validate, policy, snapshot, run, capture, record)
// through runner.Run for every store variant: the given directory, the
// same with Durable (fsync of result.json), and tmpfs (/dev/shm). Rounds
// interleave the variants so that load from other processes hits all of
// them alike. The mean time of each pipeline stage is printed per variant.
// Then a generated 10,000-file tree is copied with snapshot.Copy.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"time"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/snapshot"
)

func main() {
	n := flag.Int("n", 300, "rounds (each runs every variant once)")
	files := flag.Int("files", 10000, "files in the generated snapshot tree")
	storeDir := flag.String("store", os.TempDir(), "directory for the disk-backed store")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the job rounds to this file")
	flag.Parse()

	variants := []*variant{{name: "bare fork/exec /bin/true", run: func() error { return exec.Command("/bin/true").Run() }}}
	for _, v := range []struct {
		name, dir string
		durable   bool
	}{
		{"local_process job, store on " + *storeDir, *storeDir, false},
		{"local_process job, same, Durable (fsync)", *storeDir, true},
		{"local_process job, store on /dev/shm", "/dev/shm", false},
	} {
		jv, cleanup, err := jobVariant(v.name, v.dir, v.durable)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (skipped)\n", v.name, err)
			continue
		}
		defer cleanup()
		variants = append(variants, jv)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
	}
	for i := 0; i < *n; i++ {
		for _, v := range variants {
			start := time.Now()
			if err := v.run(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", v.name, err)
				os.Exit(1)
			}
			v.times = append(v.times, time.Since(start))
		}
	}
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}

	fmt.Printf("%-46s %10s %10s %10s %12s\n", fmt.Sprintf("measurement (%d interleaved rounds)", *n), "p50", "mean", "p99", "mean-bare")
	bare := variants[0].stats()
	for _, v := range variants {
		s := v.stats()
		fmt.Printf("%-46s %10s %10s %10s %12s\n", v.name, round(s.p50), round(s.mean), round(s.p99), round(s.mean-bare.mean))
	}
	fmt.Println("\nmean time per pipeline stage:")
	for _, v := range variants[1:] {
		fmt.Printf("  %-44s", v.name)
		for _, st := range []string{"validate", "policy", "snapshot", "backend", "artifacts", "record"} {
			fmt.Printf(" %s %s", st, round(v.stages[st]/time.Duration(*n)))
		}
		fmt.Println()
	}
	fmt.Printf("\njob overhead above bare exec (mean), goal < 2ms: %s on %s, %s on /dev/shm\n\n",
		round(variants[1].stats().mean-bare.mean), *storeDir, round(variants[len(variants)-1].stats().mean-bare.mean))

	for _, dir := range []string{*storeDir, "/dev/shm"} {
		d, size, err := snapshotBench(dir, *files)
		if err != nil {
			fmt.Println("snapshot bench:", err)
			continue
		}
		fmt.Printf("snapshot.Copy of %d files (%d MB) on %s: %s\n", *files, size>>20, dir, round(d))
	}
}

type variant struct {
	name   string
	run    func() error
	times  []time.Duration
	stages map[string]time.Duration
}

type stats struct {
	p50, p99, mean time.Duration
}

func (v *variant) stats() stats {
	ds := append([]time.Duration(nil), v.times...)
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	n := len(ds)
	return stats{p50: ds[n/2], p99: ds[n*99/100], mean: total / time.Duration(n)}
}

// jobVariant runs /bin/true on a one-file workspace through runner.Run
// with the store under base.
func jobVariant(name, base string, durable bool) (*variant, func(), error) {
	dir, err := os.MkdirTemp(base, "ar-bench-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "README"), []byte("tiny workspace\n"), 0o644)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", Durable: durable})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	req := job.Request{
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"/bin/true"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}},
	}
	v := &variant{name: name, stages: map[string]time.Duration{}}
	opts := runner.Options{Stage: func(_, stage string, d time.Duration) { v.stages[stage] += d }}
	v.run = func() error {
		res, err := r.Run(context.Background(), req, opts)
		if err != nil {
			return err
		}
		if res.Status != job.StatusCompleted {
			return fmt.Errorf("job %s: %+v", res.Status, res.Error)
		}
		return nil
	}
	return v, cleanup, nil
}

// snapshotBench copies a generated tree of n files (~20 KB each).
func snapshotBench(base string, n int) (time.Duration, int64, error) {
	dir, err := os.MkdirTemp(base, "ar-snap-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "src")
	chunk := make([]byte, 20<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	var size int64
	for i := 0; i < n; i++ {
		p := filepath.Join(src, fmt.Sprintf("pkg%03d", i/100), fmt.Sprintf("file%05d.go", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		chunk[0] = byte(i)
		if err := os.WriteFile(p, chunk, 0o644); err != nil {
			return 0, 0, err
		}
		size += int64(len(chunk))
	}
	start := time.Now()
	if _, err := snapshot.Copy(context.Background(), src, filepath.Join(dir, "dst"), snapshot.Options{}); err != nil {
		return 0, 0, err
	}
	return time.Since(start), size, nil
}

func round(d time.Duration) string {
	if d < 0 {
		return "-" + round(-d)
	}
	if d < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}
