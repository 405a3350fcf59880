// Command pipeline measures what the job pipeline costs on top of a bare
// process start, and what a workspace snapshot costs, and prints the
// figures side by side:
//
//	go run ./bench/pipeline [-n 300] [-files 10000] [-store DIR]
//
// It runs /bin/true N times with a bare fork/exec, then N times as a full
// local_process job (validate, policy, snapshot, run, capture, record) with
// the store on the given directory and on tmpfs (/dev/shm), then copies a
// generated 10,000-file tree with snapshot.Copy.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/snapshot"
)

func main() {
	n := flag.Int("n", 300, "iterations per measurement")
	files := flag.Int("files", 10000, "files in the generated snapshot tree")
	storeDir := flag.String("store", os.TempDir(), "directory for the disk-backed store")
	flag.Parse()

	bare := measure(*n, func() error { return exec.Command("/bin/true").Run() })
	disk := jobBench(*n, *storeDir, false)
	diskDurable := jobBench(*n, *storeDir, true)
	var shm stats
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm = jobBench(*n, "/dev/shm", false)
	}

	fmt.Printf("%-44s %10s %10s %10s\n", "measurement (n="+fmt.Sprint(*n)+")", "p50", "mean", "p99")
	row := func(name string, s stats) {
		if s.n == 0 {
			return
		}
		fmt.Printf("%-44s %10s %10s %10s\n", name, round(s.p50), round(s.mean), round(s.p99))
	}
	row("bare fork/exec /bin/true", bare)
	row("local_process job, store on "+*storeDir, disk)
	row("local_process job, store on disk, Durable", diskDurable)
	row("local_process job, store on /dev/shm", shm)
	fmt.Printf("\njob overhead above bare exec (mean): disk %s, disk+fsync %s, tmpfs %s (goal < 2ms)\n",
		round(disk.mean-bare.mean), round(diskDurable.mean-bare.mean), round(shm.mean-bare.mean))

	for _, dir := range []string{*storeDir, "/dev/shm"} {
		d, size, err := snapshotBench(dir, *files)
		if err != nil {
			fmt.Println("snapshot bench:", err)
			continue
		}
		fmt.Printf("snapshot.Copy of %d files (%d MB) on %s: %s\n", *files, size>>20, dir, round(d))
	}
}

type stats struct {
	n              int
	p50, p99, mean time.Duration
}

func measure(n int, fn func() error) stats {
	ds := make([]time.Duration, 0, n)
	var total time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := fn(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		d := time.Since(start)
		ds = append(ds, d)
		total += d
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return stats{n: n, p50: ds[n/2], p99: ds[n*99/100], mean: total / time.Duration(n)}
}

func jobBench(n int, base string, durable bool) stats {
	dir, err := os.MkdirTemp(base, "ar-bench-")
	if err != nil {
		return stats{}
	}
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "README"), []byte("tiny workspace\n"), 0o644)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), Durable: durable})
	if err != nil {
		return stats{}
	}
	req := job.Request{
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"/bin/true"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}},
	}
	return measure(n, func() error {
		res, err := r.Run(context.Background(), req, runner.Options{})
		if err != nil {
			return err
		}
		if res.Status != job.StatusCompleted {
			return fmt.Errorf("job %s: %+v", res.Status, res.Error)
		}
		return nil
	})
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
	if d < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}
