package acceptance

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"
)

// nodeWorks reports whether node and npm are on PATH (the [node]
// condition: the official E2B SDK's scripts need both).
func nodeWorks() bool {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

// cmdE2BSDK installs the official e2b npm package at VERSION into a
// cache directory (reused while it holds that version; installed
// beside it and renamed into place, so parallel runs never see half of
// it) and sets E2B_SDK_DIR to it, for a node script to require('e2b')
// from.
//
//	e2bsdk VERSION
func cmdE2BSDK(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: e2bsdk VERSION")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agent-runner", "e2b-sdk-"+args[0])
	if installedVersion(dir) != args[0] {
		ts.Check(os.MkdirAll(filepath.Dir(dir), 0o755))
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "e2b-sdk-install-")
		ts.Check(err)
		defer os.RemoveAll(tmp)
		npm := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", tmp, "e2b@"+args[0])
		// npm keeps its download cache in the real home, not the
		// script's.
		npm.Env = append(os.Environ(), "npm_config_update_notifier=false")
		out, err := npm.CombinedOutput()
		ts.Logf("npm install e2b@%s:\n%s", args[0], out)
		ts.Check(err)
		os.RemoveAll(dir)
		ts.Check(os.Rename(tmp, dir))
	}
	ts.Logf("e2b SDK %s in %s", args[0], dir)
	ts.Setenv("E2B_SDK_DIR", dir)
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
