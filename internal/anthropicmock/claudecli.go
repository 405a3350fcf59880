package anthropicmock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ClaudeCodeVersion is the Claude Code release the tests run: the newest
// 2.1.x when it was chosen. From 2.1.113 the npm package ships a native
// executable (bin/claude.exe, copied from a per-platform optional
// dependency by its postinstall script) instead of cli.js; CLI handles both.
// AGENT_RUNNER_CLAUDE_CODE_VERSION overrides it.
const ClaudeCodeVersion = "2.1.330"

// installTimeout bounds one npm install.
const installTimeout = 5 * time.Minute

// stubSize is the size under which bin/claude.exe is still the package's
// placeholder, not the native executable its postinstall puts there.
const stubSize = 4096

// CacheDir is where CLI installs version: $AGENT_RUNNER_TEST_CACHE, else
// the user's cache directory (~/.cache), under agent-runner-test, in
// claude-code-<version>.
func CacheDir(version string) (string, error) {
	root := os.Getenv("AGENT_RUNNER_TEST_CACHE")
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("anthropicmock: no cache directory (set AGENT_RUNNER_TEST_CACHE): %w", err)
		}
		root = filepath.Join(c, "agent-runner-test")
	}
	return filepath.Join(root, "claude-code-"+version), nil
}

// CLI returns the command (an argv prefix) that runs Claude Code version,
// installing it with npm into CacheDir(version) when it is not there. The
// install goes to a temporary directory renamed into place, so concurrent
// callers never see half an install.
func CLI(ctx context.Context, version string) ([]string, error) {
	dir, err := CacheDir(version)
	if err != nil {
		return nil, err
	}
	if argv, err := resolveCLI(dir); err == nil {
		return argv, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("anthropicmock: cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("anthropicmock: cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", tmp,
		"@anthropic-ai/claude-code@"+version, "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("anthropicmock: npm install @anthropic-ai/claude-code@%s: %w\n%s", version, err, out)
	}
	if _, err := resolveCLI(tmp); err != nil {
		return nil, err
	}
	// MkdirTemp made it 0700; a sandbox's uid must reach the CLI.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("anthropicmock: cache: %w", err)
	}
	if argv, err := resolveCLI(dir); err == nil {
		return argv, nil // another caller finished first
	}
	if err := moveAside(dir); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if argv, rerr := resolveCLI(dir); rerr == nil {
			return argv, nil // another caller renamed its install into place first
		}
		return nil, fmt.Errorf("anthropicmock: cache: %w", err)
	}
	return resolveCLI(dir)
}

// moveAside removes dir, a broken install, if there is one, by renaming it
// out of the way first so that no caller sees it half removed.
func moveAside(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	aside, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".broken-")
	if err != nil {
		return fmt.Errorf("anthropicmock: cache: %w", err)
	}
	defer os.RemoveAll(aside)
	if err := os.Rename(dir, filepath.Join(aside, "install")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("anthropicmock: cache: moving a broken install aside: %w", err)
	}
	return nil
}

// resolveCLI finds the command in an npm prefix holding Claude Code: node
// and cli.js for releases that ship it, else the native executable, else
// node and cli-wrapper.cjs (which finds the platform package itself, for an
// install whose postinstall did not run).
func resolveCLI(prefix string) ([]string, error) {
	pkg := filepath.Join(prefix, "node_modules", "@anthropic-ai", "claude-code")
	raw, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		return nil, fmt.Errorf("anthropicmock: Claude Code not installed in %s: %w", prefix, err)
	}
	var manifest struct {
		Bin map[string]string `json:"bin"`
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return nil, fmt.Errorf("anthropicmock: %s/package.json: %w", pkg, err)
	}
	bin := manifest.Bin["claude"]
	if bin == "" {
		return nil, fmt.Errorf("anthropicmock: %s/package.json has no claude bin", pkg)
	}
	path := filepath.Join(pkg, bin)
	if strings.HasSuffix(bin, ".js") || strings.HasSuffix(bin, ".mjs") {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("anthropicmock: %w", err)
		}
		return []string{"node", path}, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() >= stubSize && fi.Mode()&0o111 != 0 {
		return []string{path}, nil
	}
	wrapper := filepath.Join(pkg, "cli-wrapper.cjs")
	if _, err := os.Stat(wrapper); err != nil {
		return nil, fmt.Errorf("anthropicmock: %s is a placeholder and there is no cli-wrapper.cjs", path)
	}
	return []string{"node", wrapper}, nil
}

// ClaudeCodeEnv is the environment under which Claude Code runs headless
// behind an HTTPS proxy that intercepts TLS with a private CA, as a task's
// agent behind the egress gateway: HOME and TMPDIR (it writes ~/.claude.json,
// ~/.claude/ and $TMPDIR/cc-socks), the API key (sent as x-api-key, so a
// placeholder that the proxy swaps works), HTTPS_PROXY (every connection,
// API and start-up calls alike, is a CONNECT through it), the proxy's CA in
// NODE_EXTRA_CA_CERTS (added to the bundled roots; SSL_CERT_FILE works too),
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (no telemetry, error reporting,
// update or feature-flag calls), and IS_SANDBOX=1, without which
// --dangerously-skip-permissions refuses to run as root.
func ClaudeCodeEnv(home, tmp, proxyURL, caFile, apiKey string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"ANTHROPIC_API_KEY=" + apiKey,
		"HTTPS_PROXY=" + proxyURL,
		"NODE_EXTRA_CA_CERTS=" + caFile,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"IS_SANDBOX=1",
	}
}

// CLIForTest is CLI(ctx, version) for a test, version being
// $AGENT_RUNNER_CLAUDE_CODE_VERSION or ClaudeCodeVersion. It skips t when
// node or npm is missing, or when the install fails outside CI ($CI unset);
// in CI a failed install fails t.
func CLIForTest(t testing.TB) []string {
	t.Helper()
	version := os.Getenv("AGENT_RUNNER_CLAUDE_CODE_VERSION")
	if version == "" {
		version = ClaudeCodeVersion
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("Claude Code %s needs %s to install, and it is not on PATH: %v", version, tool, err)
		}
	}
	argv, err := CLI(t.Context(), version)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("installing Claude Code %s: %v", version, err)
		}
		t.Skipf("installing Claude Code %s failed (the test fails instead when $CI is set): %v", version, err)
	}
	return argv
}
