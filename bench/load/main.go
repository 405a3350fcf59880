// Command load measures the HTTP service end to end: it builds
// agent-runner, starts `serve` on loopback and prints, for each mode,
// throughput and mean/p50/p95/p99 submit-to-terminal latency at each
// concurrency (every operation is submitted, then followed to its terminal
// state), and serve's RSS. Modes (-modes, comma separated, or all):
//
//   - local_process: /bin/true jobs on local_process (serve
//     --unsafe-local-process), then serve's RSS idle and with -queued jobs
//     queued (serve --no-workers).
//   - linux_sandbox: /bin/true jobs on linux_sandbox (needs root, or
//     unprivileged user namespaces).
//   - task: a trivial agent task (a shell script that prints a line) through
//     POST /api/v1/tasks, polled to its terminal state, on each of
//     -task-backends.
//   - remote: /bin/true jobs on -remote-backend, on serve's own workers and
//     on `agent-runner worker --nats` beside `serve --no-workers
//     --nats-listen`, in alternating rounds; it prints the difference.
//
// Run from the repository root:
//
//	go run ./bench/load [-modes local_process] [-jobs 2000] [-levels 1,16,64] [-workers 4] [-queued 10000]
//	go run ./bench/load -modes all -jobs 500 -levels 1,16 -tasks 50 -task-levels 1,8
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// modes are the measurements run, in this order, by -modes all.
var modes = []string{"local_process", "linux_sandbox", "task", "remote"}

// config is what one run measures.
type config struct {
	Modes        []string
	Jobs         int      // jobs per concurrency level (job modes, remote)
	Levels       []int    // concurrencies of the job modes and remote
	Workers      int      // serve's (and the remote worker's) --workers
	Queued       int      // jobs queued for the RSS measurement; 0 skips it
	Tasks        int      // tasks per concurrency level
	TaskLevels   []int    // concurrencies of the task mode
	TaskBackends []string // backends of the task mode
	TaskPoll     time.Duration
	Remote       string // backend of the remote mode
	Rounds       int    // alternating rounds of the remote mode
	StoreBase    string // parent of the temporary directory ("" = $TMPDIR)
	ServerArgs   []string
	Bin          string        // a built agent-runner to measure ("" = build this tree)
	AllowShell   bool          // the jobs' policy allows the shell (no shell denial)
	Timeout      time.Duration // longest submit-to-terminal before the run fails
	IdleConns    int           // idle HTTP connections kept per server
	Out          io.Writer
}

func main() {
	var c config
	var modeList, levels, taskLevels, taskBackends, serverArgs string
	flag.StringVar(&modeList, "modes", "local_process", "comma-separated modes: "+strings.Join(modes, ",")+", or all")
	flag.IntVar(&c.Jobs, "jobs", 2000, "jobs per concurrency level")
	flag.StringVar(&levels, "levels", "1,16,64", "concurrency levels of the job modes and remote")
	flag.IntVar(&c.Workers, "workers", 4, "serve workers (and the remote worker's)")
	flag.IntVar(&c.Queued, "queued", 10000, "jobs queued for the RSS measurement of local_process (0 skips it)")
	flag.IntVar(&c.Tasks, "tasks", 100, "tasks per concurrency level")
	flag.StringVar(&taskLevels, "task-levels", "1,8", "concurrency levels of the task mode")
	flag.StringVar(&taskBackends, "task-backends", "local_process,linux_sandbox", "backends of the task mode")
	flag.DurationVar(&c.TaskPoll, "task-poll", 10*time.Millisecond, "pause between polls of a task's status")
	flag.StringVar(&c.Remote, "remote-backend", "local_process", "backend of the remote mode")
	flag.IntVar(&c.Rounds, "rounds", 5, "remote mode: alternating rounds of own workers and the remote worker per level")
	flag.StringVar(&c.StoreBase, "store", "", "base directory for stores (default: a temp dir)")
	flag.IntVar(&c.IdleConns, "idle-conns", 2, "idle HTTP connections the client keeps per server (2 is net/http's default, with which the issue's figures were measured)")
	flag.DurationVar(&c.Timeout, "timeout", 2*time.Minute, "longest submit-to-terminal of one job or task before the run fails")
	flag.BoolVar(&c.AllowShell, "allow-shell", false, "jobs allow the shell (policy.allow_shell), so linux_sandbox builds no shell denial: run with and without to price it")
	flag.StringVar(&c.Bin, "bin", "", "agent-runner binary to measure (default: build ./cmd/agent-runner)")
	flag.StringVar(&serverArgs, "server-args", "", "extra serve flags of the job modes, space separated (e.g. --durable)")
	flag.Parse()

	c.Modes = strings.Split(modeList, ",")
	if modeList == "all" {
		c.Modes = modes
	}
	var err error
	if c.Levels, err = ints(levels); err == nil {
		c.TaskLevels, err = ints(taskLevels)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	c.TaskBackends = strings.Split(taskBackends, ",")
	c.ServerArgs = strings.Fields(serverArgs)
	c.Out = os.Stdout
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("concurrency %q: want a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// bench is one run's binary, directories and settings.
type bench struct {
	config
	bin    string
	dir    string // temporary: the binary, stores, workspace, origin
	ws     string // the jobs' workspace
	stores int
}

// run builds agent-runner and measures each of c.Modes.
func run(c config) error {
	dir, err := os.MkdirTemp(c.StoreBase, "ar-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// linux_sandbox binds the workspace and the task origin: every
	// directory above them must be searchable by the sandbox's user.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	b := &bench{config: c, dir: dir, bin: c.Bin}
	if b.IdleConns < 1 {
		b.IdleConns = 2
	}
	if b.bin == "" {
		if b.bin, err = build(dir); err != nil {
			return err
		}
	}
	if b.ws, err = workspace(dir); err != nil {
		return err
	}
	fmt.Fprintf(c.Out, "agent-runner load, %s, %d CPUs, temp dir %s, client keeps %d idle connections per server\n",
		time.Now().Format("2006-01-02 15:04"), runtime.NumCPU(), dir, b.IdleConns)
	for _, m := range c.Modes {
		fmt.Fprintf(c.Out, "\n[load average %s]\n", loadavg())
		switch m {
		case "local_process", "linux_sandbox":
			err = b.jobMode(m)
		case "task":
			for _, kind := range c.TaskBackends {
				if err = b.taskMode(kind); err != nil {
					break
				}
			}
		case "remote":
			err = b.remoteMode(c.Remote)
		default:
			err = fmt.Errorf("unknown mode %q (want %s or all)", m, strings.Join(modes, ","))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}
	return nil
}

// store is a fresh store directory under the run's temp dir.
func (b *bench) store(name string) string {
	b.stores++
	return fmt.Sprintf("%s/store-%d-%s", b.dir, b.stores, name)
}

// loadavg is the 1, 5 and 15 minute load averages, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
