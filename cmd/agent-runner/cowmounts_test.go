package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// TestCopyOnWriteMountNodeModules: with readonly_mounts_mode
// copy_on_write a job writes node_modules/.cache (as nyc does) and reads
// it back; the caller's node_modules is unchanged, the writes are in
// neither the snapshot nor the artifacts, the readonly_mounts digest is
// the read-only mode's, and replay finds it unchanged. The same job with
// the default mode gets EROFS; one writing past limits.tmp_mb gets
// ENOSPC; local_process refuses the request.
func TestCopyOnWriteMountNodeModules(t *testing.T) {
	sandboxUsable(t)
	ws, store := openDir(t), openDir(t)
	writeFiles(t, ws, map[string]string{
		"node_modules/leftpad/index.js":    "module.exports = 1;\n",
		"node_modules/.cache/babel/a.json": "{}\n",
		"main.txt":                         "workspace file\n",
	})
	nm := filepath.Join(ws, "node_modules")
	before := backendtest.TreeDigest(t, nm)
	script := `exec 2>&1; mkdir -p node_modules/.cache/x && echo y > node_modules/.cache/x/y && cat node_modules/.cache/x/y && mkdir -p node_modules/.cache/nyc && echo x > node_modules/.cache/nyc/out.json && cat node_modules/.cache/nyc/out.json && echo b > node_modules/.cache/babel/b.json && echo ok`
	if _, err := os.Stat("/usr/bin/node"); err == nil {
		// A small nyc-like check: node writes its cache into node_modules.
		script += ` && /usr/bin/node -e "const fs=require('fs'); fs.mkdirSync('node_modules/.cache/nyc/processinfo',{recursive:true}); fs.writeFileSync('node_modules/.cache/nyc/processinfo/index.json','{}'); console.log(fs.readFileSync('node_modules/.cache/nyc/processinfo/index.json','utf8'))"`
	}
	extra := "" // more workspace fields
	request := func(mode, limits, kind string) string {
		m := extra
		if mode != "" {
			m += `,"readonly_mounts_mode":"` + mode + `"`
		}
		return `{"workspace":{"path":"` + ws + `","readonly_mounts":["node_modules"]` + m + `},` +
			`"command":{"argv":["/bin/sh","-c",` + quoteJSON(script) + `]},` +
			`"policy":{"allowed_commands":["sh","node"],"allow_shell":true,"artifact_globs":["**"]},` +
			`"limits":{` + limits + `},"backend":{"kind":"` + kind + `"}}`
	}

	res := runResult(t, store, request(job.MountsCopyOnWrite, "", "linux_sandbox"))
	want := "y\nx\nok\n"
	if _, err := os.Stat("/usr/bin/node"); err == nil {
		want += "{}\n"
	}
	if res.Status != job.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout.Text != want {
		t.Fatalf("copy-on-write job = %s %+v stdout %q stderr %q, want completed with %q", res.Status, res.Error, res.Stdout.Text, res.Stderr.Text, want)
	}
	if after := backendtest.TreeDigest(t, nm); after != before {
		t.Errorf("the caller's node_modules changed (digest %s, was %s)", after, before)
	}
	for _, p := range []string{".cache/x", ".cache/nyc", ".cache/babel/b.json"} {
		if _, err := os.Lstat(filepath.Join(nm, p)); err == nil {
			t.Errorf("the job's node_modules/%s reached the host", p)
		}
	}
	if _, err := os.Stat(filepath.Join(store, "runs", res.JobID, "snapshot", "node_modules", ".cache")); err == nil {
		t.Error("node_modules is in the snapshot")
	}
	for _, a := range res.Artifacts {
		if strings.HasPrefix(a.Path, "node_modules") {
			t.Errorf("artifact %s: copy-on-write writes must not be collected", a.Path)
		}
	}
	cowDigest := res.Replay.ReadOnlyMountsSHA256
	if len(cowDigest) != 64 {
		t.Fatalf("replay.readonly_mounts_sha256 = %q, want a digest", cowDigest)
	}

	// Replay binds the same lower layer: the digest still matches.
	out, stderr, code := cli(t, "", "replay", "--run", filepath.Join(store, "runs", res.JobID))
	var rep struct {
		Checks map[string]struct{ Match bool } `json:"checks"`
		Result job.Result                      `json:"result"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("replay exit %d: %s %s", code, out, stderr)
	}
	if c, ok := rep.Checks["readonly_mounts_sha256"]; !ok || !c.Match || rep.Result.Stdout.Text != want {
		t.Errorf("replay of a copy-on-write job: check %+v (present %v) stdout %q, want a match and %q", c, ok, rep.Result.Stdout.Text, want)
	}

	// The same over an overlay snapshot on a size-limited workspace,
	// beside a writable build cache (both also sent to a root runner's
	// init as mounts, in order).
	extra = `,"snapshot_strategy":"overlay","caches":[{"name":"cow-test","path":"/cache/cow"}]`
	ov := runResult(t, store, request(job.MountsCopyOnWrite, `"disk_mb":64`, "linux_sandbox"))
	if ov.Status != job.StatusCompleted || ov.Stdout.Text != want {
		t.Errorf("copy-on-write over an overlay snapshot = %s %+v stdout %q stderr %q, want completed with %q", ov.Status, ov.Error, ov.Stdout.Text, ov.Stderr.Text, want)
	}
	if after := backendtest.TreeDigest(t, nm); after != before {
		t.Error("the caller's node_modules changed")
	}
	extra = ""

	// The default mode is read-only: the first write fails with EROFS,
	// and the digest is the same (it describes the host directory).
	ro := runResult(t, store, request("", "", "linux_sandbox"))
	if ro.Status == job.StatusCompleted || !strings.Contains(ro.Stdout.Text, "Read-only file system") {
		t.Errorf("read-only job = %s %+v stdout %q, want a failure with EROFS", ro.Status, ro.Error, ro.Stdout.Text)
	}
	if ro.Replay.ReadOnlyMountsSHA256 != cowDigest {
		t.Errorf("readonly_mounts_sha256: read-only %s, copy-on-write %s; want the same", ro.Replay.ReadOnlyMountsSHA256, cowDigest)
	}

	// Past the cap (limits.tmp_mb): ENOSPC inside the job.
	script = `exec 2>&1; dd if=/dev/zero of=node_modules/.cache/big bs=1M count=8; echo rc=$?`
	full := runResult(t, store, request(job.MountsCopyOnWrite, `"tmp_mb":4`, "linux_sandbox"))
	if !strings.Contains(full.Stdout.Text, "No space left on device") || strings.Contains(full.Stdout.Text, "rc=0") {
		t.Errorf("8 MiB into a 4 MiB copy-on-write layer: %s stdout %q, want ENOSPC", full.Status, full.Stdout.Text)
	}
	if after := backendtest.TreeDigest(t, nm); after != before {
		t.Error("the caller's node_modules changed")
	}

	// local_process cannot bind at all: refused before anything runs.
	_, stderr, code = cli(t, "", "run", "--store-dir", store, "--backend", "local-process", "--request", requestFile(t, request(job.MountsCopyOnWrite, "", "local_process")))
	if code != 2 || !strings.Contains(stderr, "readonly_mounts") {
		t.Errorf("copy_on_write on local_process: exit %d %s, want 2 naming the field", code, stderr)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
