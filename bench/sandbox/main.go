// Command sandbox compares process-start costs side by side and as ratios:
// bare /bin/true, bubblewrap (`bwrap --ro-bind / / --unshare-all
// --die-with-parent /bin/true`, Debian's bubblewrap), a linux_sandbox
// backend run and a local_process backend run of /bin/true, then full
// pipeline jobs on both backends; then a sandbox's lifecycle phase by
// phase (lifecycle.go) beside the one-shot Run.
//
//	go run ./bench/sandbox [-n 200] [-lifecycle-only]
//
// The binary re-execs itself as the sandbox init, like agent-runner does.
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

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

func main() {
	linuxsandbox.MaybeInit()
	n := flag.Int("n", 200, "iterations per measurement")
	files := flag.Int("files", 10000, "files in the copy-vs-overlay workspace")
	fileKB := flag.Int("file-kb", 20, "size of each file in KiB (10,000 x 20 KiB = 200 MB)")
	lifecycleOnly := flag.Bool("lifecycle-only", false, "measure only the lifecycle phases and the one-shot Run")
	flag.Parse()
	dir, err := os.MkdirTemp("", "ar-sbx-bench-")
	check(err)
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	ws := filepath.Join(dir, "ws")
	check(os.MkdirAll(ws, 0o755))
	check(os.WriteFile(filepath.Join(ws, "README"), []byte("tiny\n"), 0o644))

	if *lifecycleOnly {
		lifecycleComparison(*n, ws)
		return
	}
	type row struct {
		name string
		d    time.Duration
	}
	var rows []row
	add := func(name string, fn func() error) {
		rows = append(rows, row{name, measure(*n, fn)})
	}
	add("bare /bin/true", func() error { return exec.Command("/bin/true").Run() })
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		add("bwrap --ro-bind / / --unshare-all", func() error {
			return exec.Command(bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "/bin/true").Run()
		})
	} else {
		fmt.Println("(bwrap not installed: apt-get install bubblewrap)")
	}
	sbx, err := linuxsandbox.New(backend.Config{})
	check(err)
	if err := sbx.Available(context.Background()); err != nil {
		fmt.Println("linux_sandbox unavailable:", err)
	} else {
		add("linux_sandbox backend run", func() error { return backendRun(sbx, ws) })
	}
	add("local_process backend run", func() error { return backendRun(localprocess.Backend{}, ws) })
	if sbx.Available(context.Background()) == nil {
		add("linux_sandbox full job (pipeline)", jobRun(dir, ws, "linux_sandbox"))
	}
	add("local_process full job (pipeline)", jobRun(dir, ws, "local_process"))

	base := rows[0].d
	var bwrapD time.Duration
	for _, r := range rows {
		if r.name == "bwrap --ro-bind / / --unshare-all" {
			bwrapD = r.d
		}
	}
	fmt.Printf("%-38s %10s %10s %10s\n", fmt.Sprintf("median of %d", *n), "time", "x bare", "x bwrap")
	for _, r := range rows {
		vsBwrap := "-"
		if bwrapD > 0 {
			vsBwrap = fmt.Sprintf("%.2f", float64(r.d)/float64(bwrapD))
		}
		fmt.Printf("%-38s %10s %10.2f %10s\n", r.name, r.d.Round(10*time.Microsecond), float64(r.d)/float64(base), vsBwrap)
	}
	lifecycleComparison(*n, ws)
	if sbx.Available(context.Background()) == nil {
		snapshotComparison(dir, *files, *fileKB)
	}
}

// snapshotComparison times the snapshot stage of a first and a second job
// on a generated workspace with each strategy.
func snapshotComparison(dir string, files, kb int) {
	src := filepath.Join(dir, "big")
	chunk := make([]byte, kb<<10)
	for i := 0; i < files; i++ {
		p := filepath.Join(src, fmt.Sprintf("pkg%03d", i/100), fmt.Sprintf("f%05d.txt", i))
		check(os.MkdirAll(filepath.Dir(p), 0o755))
		chunk[0] = byte(i)
		check(os.WriteFile(p, chunk, 0o644))
	}
	fmt.Printf("\nsnapshot stage, %d files / %d MB workspace:\n", files, files*kb>>10)
	for _, strategy := range []string{job.SnapshotCopy, job.SnapshotOverlay} {
		r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store-snap-"+strategy), MaxSnapshotFiles: files + 10})
		check(err)
		req := job.Request{
			Workspace: job.Workspace{Path: src, SnapshotStrategy: strategy},
			Command:   job.Command{Argv: []string{"/bin/true"}},
			Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}},
			Backend:   job.BackendSpec{Kind: "linux_sandbox"},
		}
		var times []time.Duration
		for i := 0; i < 2; i++ {
			var snap time.Duration
			res, err := r.Run(context.Background(), req, runner.Options{Stage: func(_, stage string, d time.Duration) {
				if stage == "snapshot" {
					snap = d
				}
			}})
			check(err)
			if res.Status != job.StatusCompleted {
				check(fmt.Errorf("%s job: %s %+v", strategy, res.Status, res.Error))
			}
			times = append(times, snap)
		}
		fmt.Printf("  %-8s first job %10s   second job %10s\n", strategy, times[0].Round(100*time.Microsecond), times[1].Round(100*time.Microsecond))
	}
}

// benchSpec is the Spec every backend measurement runs: /bin/true with
// memory, process, CPU and /tmp limits.
func benchSpec(ws string) backend.Spec {
	return backend.Spec{
		JobID: "bench", Argv: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"},
		Workspace: backend.Workspace{Dir: ws}, Cwd: ".", Network: job.NetworkDisabled,
		Limits: backend.Limits{Timeout: 10 * time.Second, MemoryBytes: 256 << 20, MaxProcesses: 64, TmpBytes: 16 << 20, CPUCount: 1},
	}
}

func backendRun(b backend.Backend, ws string) error {
	out, err := b.Run(context.Background(), benchSpec(ws))
	if err != nil {
		return err
	}
	if out.ExitCode == nil || *out.ExitCode != 0 {
		return fmt.Errorf("%s: %s %s", b.Kind(), out.Reason, out.Signal)
	}
	return nil
}

func jobRun(dir, ws, kind string) func() error {
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store-"+kind)})
	check(err)
	req := job.Request{
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"/bin/true"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}},
		Backend:   job.BackendSpec{Kind: kind},
	}
	return func() error {
		res, err := r.Run(context.Background(), req, runner.Options{})
		if err != nil {
			return err
		}
		if res.Status != job.StatusCompleted {
			return fmt.Errorf("%s job: %s %+v", kind, res.Status, res.Error)
		}
		return nil
	}
}

func measure(n int, fn func() error) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		check(fn())
		ds[i] = time.Since(start)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[n/2]
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
