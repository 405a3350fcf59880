package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// openDir is a temporary directory the sandbox uid can traverse.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	os.Chmod(filepath.Dir(d), 0o755)
	os.Chmod(d, 0o755)
	return d
}

// runResult runs body with the CLI against store and decodes the result.
func runResult(t *testing.T, store, body string, args ...string) job.Result {
	t.Helper()
	out, stderr, code := cli(t, "", append([]string{"run", "--store-dir", store, "--request", requestFile(t, body)}, args...)...)
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	var res job.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("result: %v\n%s", err, out)
	}
	return res
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadOnlyMountNodeModules: an installed node_modules is bound
// read-only at /workspace/node_modules without being copied; node
// resolves a package from it and a write into it fails.
func TestReadOnlyMountNodeModules(t *testing.T) {
	sandboxUsable(t)
	ws, store := openDir(t), openDir(t)
	writeFiles(t, ws, map[string]string{
		"node_modules/leftpad/index.js": "module.exports = (s, n) => String(s).padStart(n, '.');\n",
		"main.txt":                      "workspace file\n",
	})
	argv := `["/usr/bin/node","-e","const lp = require('leftpad'); console.log(lp('x', 3)); try { require('fs').writeFileSync('node_modules/leftpad/evil.js', 'x'); console.log('wrote') } catch (e) { console.log(e.code) }"]`
	allowed := `["node"]`
	want := "..x\nEROFS\n"
	if _, err := os.Stat("/usr/bin/node"); err != nil {
		argv = `["/usr/bin/python3","-c","print(open('node_modules/leftpad/index.js').read().split()[0])\ntry:\n  open('node_modules/leftpad/evil.js','w')\n  print('wrote')\nexcept OSError as e:\n  print(e.errno == 30 and 'EROFS' or e)"]`
		allowed, want = `["python3"]`, "module.exports\nEROFS\n"
	}
	body := `{"workspace":{"path":"` + ws + `","readonly_mounts":["node_modules"]},"command":{"argv":` + argv + `},"policy":{"allowed_commands":` + allowed + `},"backend":{"kind":"linux_sandbox"}}`
	res := runResult(t, store, body)
	if res.Status != job.StatusCompleted || res.Stdout.Text != want {
		t.Fatalf("job = %s %+v stdout %q stderr %q, want completed with %q", res.Status, res.Error, res.Stdout.Text, res.Stderr.Text, want)
	}
	if _, err := os.Stat(filepath.Join(ws, "node_modules", "leftpad", "evil.js")); err == nil {
		t.Error("the job wrote into the caller's node_modules")
	}
	snap := filepath.Join(store, "runs", res.JobID, "snapshot")
	if _, err := os.Stat(filepath.Join(snap, "node_modules", "leftpad", "index.js")); err == nil {
		t.Error("node_modules was copied into the snapshot")
	}
	if _, err := os.Stat(filepath.Join(snap, "main.txt")); err != nil {
		t.Errorf("the rest of the workspace was not copied: %v", err)
	}
	if len(res.Replay.ReadOnlyMountsSHA256) != 64 {
		t.Errorf("replay.readonly_mounts_sha256 = %q, want a digest", res.Replay.ReadOnlyMountsSHA256)
	}

	// The digest follows the mount's listing; replay compares it.
	writeFiles(t, ws, map[string]string{"node_modules/other/index.js": "1\n"})
	out, stderr, code := cli(t, "", "replay", "--run", filepath.Join(store, "runs", res.JobID))
	var rep struct {
		Checks map[string]struct{ Match bool } `json:"checks"`
		Result job.Result                      `json:"result"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("replay exit %d: %s %s", code, out, stderr)
	}
	if c, ok := rep.Checks["readonly_mounts_sha256"]; !ok || c.Match {
		t.Errorf("replay after node_modules changed: check %+v (present %v), want a mismatch", c, ok)
	}
	if rep.Result.Stdout.Text != want {
		t.Errorf("replay stdout = %q, want %q (node_modules bound from the original workspace)", rep.Result.Stdout.Text, want)
	}

	// local_process cannot bind: refused before anything runs.
	_, stderr, code = cli(t, "", "run", "--store-dir", store, "--backend", "local-process", "--request", requestFile(t, body))
	if code != 2 || !strings.Contains(stderr, "readonly_mounts") {
		t.Errorf("readonly_mounts on local_process: exit %d %s, want 2 naming the field", code, stderr)
	}
}

// TestCacheReusedAcrossJobs: job 1 writes into a named cache, job 2 (in
// another host uid range) reads it, replaces it and adds to a directory
// job 1 made.
func TestCacheReusedAcrossJobs(t *testing.T) {
	sandboxUsable(t)
	store := openDir(t)
	request := func(script string) string {
		return `{"workspace":{"path":"` + openDir(t) + `","caches":[{"name":"x","path":"/cache/x"}]},"command":{"argv":["/usr/bin/python3","-c",` + jsonString(script) + `]},"policy":{"allowed_commands":["python3"]},"backend":{"kind":"linux_sandbox"}}`
	}
	res := runResult(t, store, request("import os\nos.makedirs('/cache/x/d', exist_ok=True)\nopen('/cache/x/d/f','w').write('from job 1')\nprint('ok')"))
	if res.Status != job.StatusCompleted {
		t.Fatalf("job 1 = %s %+v %q", res.Status, res.Error, res.Stderr.Text)
	}
	res = runResult(t, store, request("print(open('/cache/x/d/f').read())\nopen('/cache/x/d/f','w').write('from job 2')\nopen('/cache/x/d/g','w').write('new')"))
	if res.Status != job.StatusCompleted || res.Stdout.Text != "from job 1\n" {
		t.Fatalf("job 2 = %s %+v stdout %q stderr %q, want job 1's file", res.Status, res.Error, res.Stdout.Text, res.Stderr.Text)
	}
	for name, want := range map[string]string{"f": "from job 2", "g": "new"} {
		if b, err := os.ReadFile(filepath.Join(store, "caches", "local", "x", "d", name)); err != nil || string(b) != want {
			t.Errorf("cache file %s = %q %v, want %q", name, b, err, want)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestOversizedReportKeepsVerdict: a passing run whose report is over
// max_artifact_file_bytes stays completed with exit 0 and lists the
// report as skipped (it ended policy_denied).
func TestOversizedReportKeepsVerdict(t *testing.T) {
	ws, store := openDir(t), openDir(t)
	body := `{"workspace":{"path":"` + ws + `"},"command":{"argv":["python3","-c","open('junit.xml','w').write('<t/>' * 500000); open('small.txt','w').write('ok')"]},` +
		`"policy":{"allowed_commands":["python3"],"artifact_globs":["junit.xml","small.txt"]},"limits":{"max_artifact_file_bytes":1048576},"backend":{"kind":"local_process"}}`
	res := runResult(t, store, body)
	if res.Status != job.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 || res.Error != nil {
		t.Fatalf("job = %s exit %v error %+v, want completed with exit 0", res.Status, res.ExitCode, res.Error)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "small.txt" {
		t.Errorf("artifacts = %+v, want small.txt", res.Artifacts)
	}
	want := []job.SkippedArtifact{{Path: "junit.xml", Reason: job.SkipMaxArtifactFileBytes, SizeBytes: 2_000_000, Limit: 1 << 20}}
	if len(res.ArtifactsSkipped) != 1 || res.ArtifactsSkipped[0] != want[0] {
		t.Errorf("artifacts_skipped = %+v, want %+v", res.ArtifactsSkipped, want)
	}
}

// TestGoBuildCacheInSandbox runs `go test ./...` of a small module twice
// in linux_sandbox with a go-build cache; the second run must report the
// test as cached. Its time beside the same second run on the host with a
// warm cache is logged (go test -v -run GoBuildCache shows it).
func TestGoBuildCacheInSandbox(t *testing.T) {
	gobin := "/usr/local/go/bin/go"
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("no Go toolchain at %s to run in the sandbox", gobin)
	}
	sandboxUsable(t)
	mod := map[string]string{
		"go.mod":          "module example.com/calc\n\ngo 1.22\n",
		"calc.go":         "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go":    "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n",
		"sub/sub.go":      "package sub\n\nimport \"strings\"\n\nfunc Up(s string) string { return strings.ToUpper(s) }\n",
		"sub/sub_test.go": "package sub\n\nimport \"testing\"\n\nfunc TestUp(t *testing.T) {\n\tif Up(\"a\") != \"A\" {\n\t\tt.Fatal(\"Up\")\n\t}\n}\n",
	}
	store := openDir(t)
	env := `{"GOCACHE":"/cache/go-build","GOPATH":"/tmp/gopath","GOTOOLCHAIN":"local","GOPROXY":"off","GOFLAGS":"-mod=mod","HOME":"/tmp"}`
	sandboxed := func() (job.Result, time.Duration) {
		ws := openDir(t)
		writeFiles(t, ws, mod)
		body := `{"workspace":{"path":"` + ws + `","caches":[{"name":"go-build","path":"/cache/go-build"}]},` +
			`"command":{"argv":["` + gobin + `","test","./..."],"env":` + env + `},` +
			`"policy":{"allowed_commands":[{"basename":"go","path":"` + gobin + `"}],"allowed_env":["GOCACHE","GOPATH","GOTOOLCHAIN","GOPROXY","GOFLAGS","HOME"]},` +
			`"limits":{"memory_mb":2048,"timeout_ms":300000},"backend":{"kind":"linux_sandbox"}}`
		start := time.Now()
		res := runResult(t, store, body)
		if res.Status != job.StatusCompleted {
			t.Fatalf("go test in the sandbox = %s %+v\n%s\n%s", res.Status, res.Error, res.Stdout.Text, res.Stderr.Text)
		}
		return res, time.Since(start)
	}
	_, cold := sandboxed()
	warm, warmTime := sandboxed()
	if strings.Count(warm.Stdout.Text, "(cached)") != 2 {
		t.Errorf("second go test in the sandbox did not use the cache:\n%s", warm.Stdout.Text)
	}

	ws, cache := t.TempDir(), t.TempDir()
	writeFiles(t, ws, mod)
	host := func() time.Duration {
		cmd := exec.Command(gobin, "test", "./...")
		cmd.Dir = ws
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GOCACHE=" + cache, "GOPATH=" + t.TempDir(), "GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod", "HOME=" + t.TempDir()}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go test on the host: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	host()
	hostWarm := host()
	// What any sandboxed job costs here (CLI start, snapshot, namespaces,
	// cgroups, record), to tell it from go test's own time.
	start := time.Now()
	runResult(t, store, sandboxRequest(t, `["/bin/true"]`, `["true"]`, ""))
	baseline := time.Since(start)
	t.Logf("go test ./...: sandbox cold %v, sandbox warm %v (job %d ms), empty sandbox job %v, host warm %v; "+
		"sandbox/host %.2fx, without the empty job's cost %.2fx",
		cold.Round(time.Millisecond), warmTime.Round(time.Millisecond), warm.DurationMS, baseline.Round(time.Millisecond),
		hostWarm.Round(time.Millisecond), float64(warmTime)/float64(hostWarm), float64(warmTime-baseline)/float64(hostWarm))
}
