// Command e2b measures the E2B-compatible API (docs/e2b.md) as the
// official e2b SDK meets it: Sandbox.create + commands.run('true'),
// p50 and p99, from a template's warm pool and cold (a template of the
// same shape without a pool, and base, the default sandbox), from one
// run, the three interleaved iteration by iteration.
//
// It builds agent-runner (or takes -bin), starts `serve` on loopback
// (linux_sandbox) with --sandbox-templates defining "warm" (pool: -pool,
// default -n + 1 so that no create finds it empty) and "cold", installs
// the e2b npm package (-sdk) into the user's cache directory as the
// acceptance tests do, and runs latency.cjs with node. Each sandbox is
// killed after it is timed; serve's answer says how each started, and a
// "warm" create that started cold fails the run.
//
// Run from the repository root, as root (linux_sandbox), with node and
// npm on PATH:
//
//	go run ./bench/e2b [-n 50] [-pool N] [-refill-delay 1h] [-bin PATH]
package main

import (
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/bench/internal/benchserve"
)

//go:embed latency.cjs
var latencyScript []byte

// config is what one run measures.
type config struct {
	N           int           // sequential iterations of each mode
	Pool        int           // the warm template's pool
	RefillDelay time.Duration // serve's --sandbox-pool-refill-delay
	SDK         string        // the e2b npm package's version
	Bin         string
}

func main() {
	var c config
	flag.IntVar(&c.N, "n", 50, "sequential iterations of each of warm, cold and base")
	flag.IntVar(&c.Pool, "pool", 0, "the warm template's pool (default: n + 1, every create of the run served from it)")
	flag.DurationVar(&c.RefillDelay, "refill-delay", time.Hour, "serve's --sandbox-pool-refill-delay (the default keeps refills out of the measurement)")
	flag.StringVar(&c.SDK, "sdk", "2.51.0", "the e2b npm package's version")
	flag.StringVar(&c.Bin, "bin", "", "agent-runner binary (default: build ./cmd/agent-runner)")
	flag.Parse()
	if c.Pool == 0 {
		c.Pool = c.N + 1
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/e2b:", err)
		os.Exit(1)
	}
}

// modes are the measured templates, in the order each iteration runs
// them: name, template id, and how its creates must start.
var modes = []struct{ name, template, start string }{
	{"warm", "warm", "warm"},
	{"cold", "cold", "cold"},
	{"base", "base", "cold"},
}

// timings is what latency.cjs prints for one mode.
type timings struct {
	Create []float64      `json:"create"`
	Run    []float64      `json:"run"`
	Starts map[string]int `json:"starts"`
}

func run(c config) error {
	dir, err := os.MkdirTemp("", "ar-e2b-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if c.Bin == "" {
		if c.Bin, err = benchserve.Build(dir); err != nil {
			return err
		}
	}
	sdk, err := installSDK(c.SDK)
	if err != nil {
		return err
	}
	script := filepath.Join(dir, "latency.cjs")
	if err := os.WriteFile(script, latencyScript, 0o644); err != nil {
		return err
	}
	tpl := filepath.Join(dir, "templates.json")
	body := fmt.Sprintf(`{"warm": {"timeout_s": 600, "pool": %d}, "cold": {"timeout_s": 600}}`, c.Pool)
	if err := os.WriteFile(tpl, []byte(body), 0o644); err != nil {
		return err
	}
	s, err := benchserve.Start(c.Bin, filepath.Join(dir, "store"), dir, http.DefaultClient, "--sandbox-templates", tpl,
		"--sandbox-pool-refill-delay", c.RefillDelay.String(), "--max-sandboxes", strconv.Itoa(c.Pool+8))
	if err != nil {
		return err
	}
	defer s.Stop()

	fmt.Printf("bench/e2b: %d CPUs, load %s, e2b %s (node %s) against `agent-runner serve`, linux_sandbox\n",
		runtime.NumCPU(), loadavg(), c.SDK, nodeVersion())
	var spec []string
	for _, m := range modes {
		spec = append(spec, m.name+"="+m.template)
	}
	node := exec.Command("node", script)
	node.Env = append(os.Environ(),
		"E2B_SDK_DIR="+sdk, "E2B_API_URL="+s.URL+"/e2b", "E2B_SANDBOX_URL="+s.URL+"/e2b", "E2B_API_KEY=bench",
		"AGENT_RUNNER_URL="+s.URL, "BENCH_N="+strconv.Itoa(c.N), "BENCH_MODES="+strings.Join(spec, ","))
	node.Stderr = os.Stderr
	out, err := node.Output()
	if err != nil {
		return fmt.Errorf("node latency.cjs: %w", err)
	}
	var got map[string]timings
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("node latency.cjs printed %q: %w", out, err)
	}
	load := loadavg()
	fmt.Printf("\nSandbox.create + commands.run('true') through the SDK (%d each, sequential, interleaved; pool %d, refill delay %s; load %s)\n",
		c.N, c.Pool, c.RefillDelay, load)
	fmt.Printf("  %-22s %12s %12s %9s   %s\n", "", "p50", "p99", "p99/p50", "create p50 + run p50")
	p50 := map[string]float64{}
	for _, m := range modes {
		t := got[m.name]
		if t.Starts[m.start] != c.N+1 {
			return fmt.Errorf("%s: %d of %d creates started %s (%v)", m.name, t.Starts[m.start], c.N+1, m.start, t.Starts)
		}
		total := make([]float64, len(t.Create))
		for i := range total {
			total[i] = t.Create[i] + t.Run[i]
		}
		q := quantilesOf(total)
		p50[m.name] = q.P50
		label := fmt.Sprintf("%s (template %s)", m.name, m.template)
		fmt.Printf("  %-22s %9.1f ms %9.1f ms %9.2f   %.1f + %.1f ms\n", label, q.P50, q.P99, q.P99/q.P50,
			quantilesOf(t.Create).P50, quantilesOf(t.Run).P50)
	}
	fmt.Printf("  warm/cold p50 %.2f  warm/base p50 %.2f\n", p50["warm"]/p50["cold"], p50["warm"]/p50["base"])
	return nil
}

// quantiles are the p50 and p99 of a set of milliseconds.
type quantiles struct{ P50, P99 float64 }

func quantilesOf(v []float64) quantiles {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	at := func(q float64) float64 {
		if len(s) == 0 {
			return 0
		}
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	return quantiles{P50: at(0.50), P99: at(0.99)}
}

// installSDK installs the e2b npm package at version into the user's
// cache directory, where the acceptance tests' e2bsdk command keeps it
// (reused while it holds that version), and returns that directory.
func installSDK(version string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agent-runner", "e2b-sdk-"+version)
	if installedVersion(dir) == version {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "e2b-sdk-install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	npm := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", tmp, "e2b@"+version)
	npm.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := npm.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install e2b@%s: %v\n%s", version, err, out)
	}
	os.RemoveAll(dir)
	return dir, os.Rename(tmp, dir)
}

// installedVersion is the version of the e2b package installed in dir,
// or "".
func installedVersion(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "e2b", "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct{ Version string }
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.Version
}

// loadavg is the 1-minute load average now.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// nodeVersion is `node --version`, or "?".
func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}
