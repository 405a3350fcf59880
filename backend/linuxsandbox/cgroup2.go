package linuxsandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// On the unified hierarchy (cgroup v2) a job's cgroup is a child of the
// runner's own cgroup, with the memory, pids and cpu controllers enabled
// in the runner's cgroup.subtree_control. The kernel lets a cgroup other
// than the root enable controllers for its children only while it holds
// no processes (the no-internal-processes rule), so a runner in a cgroup
// of its own (a systemd unit with Delegate=yes, a delegated subtree of a
// rootless user) first moves itself, and any sandbox init it already
// started, into the leaf <own>/runner:
//
//	<unit>/                      subtree_control: cpu memory pids
//	<unit>/runner                the runner process
//	<unit>/agent-runner-<job>-<pid>  one job: memory.max, cpu.max, pids.max
//
// A later runner process started in <unit>/runner (or an operator who
// put it there) uses <unit> the same way. A runner in the hierarchy's
// root (no cgroup.type file) creates its jobs under the root directly.
//
// A runner that shares its cgroup with other processes (started from a
// shell or a process manager without delegation) cannot do that. When it
// is root and the host's whole hierarchy is mounted writable, it uses a
// group of its own at the top instead (cgrouptop.go):
//
//	/                            subtree_control: cpu memory pids
//	/agent-runner                subtree_control: cpu memory pids (no processes)
//	/agent-runner/agent-runner-<job>-<pid>  one job
//
// Anywhere else it refuses, saying how to give it a cgroup.

// runnerLeaf is the cgroup the runner moves itself into.
const runnerLeaf = "runner"

// v2Controllers are enabled for the jobs' parent.
var v2Controllers = []string{"cpu", "memory", "pids"}

// v2Setup serializes moving the runner and enabling controllers between
// concurrent job starts.
var v2Setup sync.Mutex

// v2Parent returns the directory that holds the job cgroups and whether
// the runner must first leave it for the leaf.
func (l cgroupLayout) v2Parent() (parent string, move bool) {
	own := l.v2
	if filepath.Base(own) == runnerLeaf {
		return filepath.Dir(own), false
	}
	// Only the root cgroup lacks cgroup.type; it may hold processes
	// and still hand out controllers.
	_, err := os.Stat(filepath.Join(own, "cgroup.type"))
	return own, err == nil
}

// v2Writable reports whether the runner can create job cgroups without
// changing anything: the controllers are delegated to the parent, the
// runner may write its cgroup.procs and subtree_control, and no process
// but the runner and its children would stay behind in it.
func (h cgroupHost) v2Writable(l cgroupLayout) bool {
	_, err := h.v2Plan(l)
	return err == nil
}

// v2OwnUsable reports why the runner cannot create job groups under
// parent, its own cgroup (or the one above its leaf), or nil.
func (h cgroupHost) v2OwnUsable(parent string, move bool) error {
	if missing := missingControllers(parent, "cgroup.controllers"); len(missing) > 0 {
		return fmt.Errorf("cgroup %s is not delegated the %s controllers", parent, strings.Join(missing, ", "))
	}
	for _, p := range []string{parent, filepath.Join(parent, "cgroup.procs"), filepath.Join(parent, "cgroup.subtree_control")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return fmt.Errorf("the runner may not write %s: %w", p, err)
		}
	}
	if move {
		if _, others := h.splitProcs(parent); len(others) > 0 {
			return fmt.Errorf("cgroup %s holds processes other than the runner's (%v)", parent, others)
		}
	}
	return nil
}

// newCgroup2 creates the job's cgroup under the parent, writes the
// limits, then moves pid in.
func (h cgroupHost) newCgroup2(l cgroupLayout, name string, pid int, lim backend.Limits) (*cgroup2, error) {
	v2Setup.Lock()
	defer v2Setup.Unlock()
	plan, err := h.v2Plan(l)
	if err != nil {
		return nil, err
	}
	parent, move := plan.parent, plan.move
	if plan.top != "" {
		if err := makeTopGroup(plan.top, parent); err != nil {
			return nil, err
		}
	}
	// A child forked while the runner moved may be born behind it and
	// keep the parent busy (EBUSY): move again and retry.
	for attempt := 1; plan.top == ""; attempt++ {
		if move {
			if err := h.enterLeaf(parent); err != nil {
				return nil, err
			}
		}
		missing := missingControllers(parent, "cgroup.subtree_control")
		if len(missing) == 0 {
			break
		}
		err := enableControllers(parent, missing)
		if err == nil {
			break
		}
		if !move || !isBusy(err) || attempt == 3 {
			return nil, err
		}
	}
	cg := &cgroup2{dir: filepath.Join(parent, name)}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, err
	}
	type write struct{ file, value string }
	var writes []write
	if lim.MemoryBytes > 0 {
		writes = append(writes, write{"memory.max", strconv.FormatInt(lim.MemoryBytes, 10)}, write{"memory.swap.max", "0"})
	}
	if lim.CPUCount > 0 {
		writes = append(writes, write{"cpu.max", fmt.Sprintf("%d %d", cpuQuotaUsec(lim.CPUCount), cpuPeriodUsec)})
	}
	if lim.MaxProcesses > 0 {
		writes = append(writes, write{"pids.max", strconv.FormatInt(lim.MaxProcesses, 10)})
	}
	for _, w := range writes {
		err := os.WriteFile(filepath.Join(cg.dir, w.file), []byte(w.value), 0o644)
		// Without swap accounting there is no memory.swap.max.
		if err != nil && !(os.IsNotExist(err) && w.file == "memory.swap.max") {
			cg.remove()
			return nil, fmt.Errorf("%s: %w", w.file, err)
		}
	}
	if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		cg.remove()
		return nil, fmt.Errorf("join cgroup: %w", err)
	}
	// Kernels before 5.19 have no memory.peak: watch memory.current.
	if _, err := os.Stat(filepath.Join(cg.dir, "memory.peak")); err != nil {
		cg.peak = watchPeak(filepath.Join(cg.dir, "memory.current"))
	}
	return cg, nil
}

// enterLeaf moves the runner and its children (sandbox inits started
// before the move) from own into own/runner, leaving own free to enable
// controllers. A process that is not the runner's stays and makes it fail.
func (h cgroupHost) enterLeaf(own string) error {
	leaf := filepath.Join(own, runnerLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("create the runner's leaf cgroup: %w", err)
	}
	ours, others := h.splitProcs(own)
	if len(others) > 0 {
		return fmt.Errorf("cgroup %s holds processes other than the runner's (%v); give the runner a cgroup of its own (systemd Delegate=yes)", own, others)
	}
	// Runner first: a child it forks meanwhile is then born in the leaf.
	slices.SortFunc(ours, func(a, b int) int { return boolInt(b == h.pid) - boolInt(a == h.pid) })
	for _, pid := range ours {
		err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		if err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("move the runner into %s: %w", leaf, err)
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// splitProcs lists the processes in dir: the runner and its children,
// and all others.
func (h cgroupHost) splitProcs(dir string) (ours, others []int) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, nil
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if pid == h.pid || h.parentOf(pid) == h.pid {
			ours = append(ours, pid)
		} else {
			others = append(others, pid)
		}
	}
	return ours, others
}

// missingControllers returns the v2Controllers that file (cgroup.controllers
// or cgroup.subtree_control) in dir does not list.
func missingControllers(dir, file string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, file))
	have := strings.Fields(string(b))
	var missing []string
	for _, c := range v2Controllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	return missing
}

// enableControllers writes "+cpu +memory ..." to dir's subtree_control.
func enableControllers(dir string, ctrls []string) error {
	var b strings.Builder
	for i, c := range ctrls {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("+" + c)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("enable %s in %s: %w", b.String(), dir, err)
	}
	return nil
}

// cgroup2 is a job's cgroup on the unified hierarchy.
type cgroup2 struct {
	dir  string
	peak *peakWatch // nil where the kernel keeps memory.peak
}

func (c *cgroup2) sample() backend.Usage {
	usec, _ := readKeyed(filepath.Join(c.dir, "cpu.stat"), "usage_usec")
	u := backend.Usage{
		CPUTime:     time.Duration(usec) * time.Microsecond,
		MemoryBytes: readInt(filepath.Join(c.dir, "memory.current")),
		Processes:   readInt(filepath.Join(c.dir, "pids.current")),
	}
	if peak, err := os.ReadFile(filepath.Join(c.dir, "memory.peak")); err == nil {
		u.PeakMemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(peak)), 10, 64)
	} else if c.peak != nil {
		u.PeakMemoryBytes = max(c.peak.max(), u.MemoryBytes)
	}
	return u
}

func (c *cgroup2) oomKilled() bool {
	n, _ := readKeyed(filepath.Join(c.dir, "memory.events"), "oom_kill")
	return n > 0
}

// remove kills whatever is left (cgroup.kill since Linux 5.14, SIGKILL
// to each listed process before) and deletes the group.
func (c *cgroup2) remove() {
	if c.peak != nil {
		c.peak.stop()
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
		b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	removeCgroupDir(c.dir)
}

// peakWatch samples a memory.current file until stopped and keeps the
// largest value: peak memory on kernels without memory.peak.
type peakWatch struct {
	mu    sync.Mutex
	peak  int64
	quit  chan struct{}
	ended chan struct{}
	once  sync.Once
}

// peakEvery is how often peakWatch samples.
const peakEvery = 50 * time.Millisecond

func watchPeak(file string) *peakWatch {
	w := &peakWatch{quit: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		t := time.NewTicker(peakEvery)
		defer t.Stop()
		for {
			n := readInt(file)
			w.mu.Lock()
			w.peak = max(w.peak, n)
			w.mu.Unlock()
			select {
			case <-w.quit:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *peakWatch) max() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// stop ends the sampling goroutine and waits for it.
func (w *peakWatch) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.ended
}
