// Package stage prepares and collects an agent task's workspace (seed
// 004): the task directory layout, a git clone of the repository
// (branch, commit and subpath honoured; file:// and local paths allowed;
// retried with backoff and jitter on transient errors only), TASK.md with
// the prompt, the progress files, and after the run the binary patch, the
// untracked-file list and their checksums. Git work shells out to git.
package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// Layout is a task directory (seed 004):
//
//	<dir>/manifest.yaml  state.json  inbox/  outbox/progress/{stdout.log,stderr.log,events.jsonl}  outbox/artifacts/
type Layout struct{ Dir string }

// Paths inside a task directory.
func (l Layout) Manifest() string  { return filepath.Join(l.Dir, "manifest.yaml") }
func (l Layout) Inbox() string     { return filepath.Join(l.Dir, "inbox") }
func (l Layout) Progress() string  { return filepath.Join(l.Dir, "outbox", "progress") }
func (l Layout) Artifacts() string { return filepath.Join(l.Dir, "outbox", "artifacts") }

// Base is the runner's own bare copy of the staged commit, outside every
// sandbox view: changes are collected against it, never through the
// agent-writable inbox/.git (see Collect).
func (l Layout) Base() string { return filepath.Join(l.Dir, "base.git") }

// Home is the task's own HOME where its processes run on the host
// (local_process; see agentstep.PrepareHome); it goes with the workspace.
func (l Layout) Home() string { return filepath.Join(l.Dir, "home") }

// Workdir is where the agent runs: the inbox, or its subpath.
func (l Layout) Workdir(t *manifest.Task) string {
	return filepath.Join(l.Inbox(), filepath.FromSlash(t.Repository.Subpath))
}

// Stage creates the layout, clones the repository into inbox/, writes
// TASK.md and the empty progress logs. manifestYAML is stored as submitted
// (it holds secret references, never values).
func Stage(ctx context.Context, l Layout, t *manifest.Task, manifestYAML []byte, b Backoff) error {
	return StageThrough(ctx, l, t, manifestYAML, b, "")
}

// StageThrough is Stage with the clone of a remote repository going
// through the HTTP proxy at proxy (the egress gateway), not the host's
// network; "" clones directly (local repositories).
func StageThrough(ctx context.Context, l Layout, t *manifest.Task, manifestYAML []byte, b Backoff, proxy string) error {
	for _, d := range []string{l.Progress(), l.Artifacts()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot create the task layout")
		}
	}
	if err := os.WriteFile(l.Manifest(), manifestYAML, 0o600); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot store manifest.yaml")
	}
	for _, f := range []string{"stdout.log", "stderr.log"} {
		if err := os.WriteFile(filepath.Join(l.Progress(), f), nil, 0o600); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot create progress logs")
		}
	}
	err := b.Retry(ctx, func() error {
		if err := emptyDir(l.Inbox()); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot clear inbox/ for the clone")
		}
		return clone(ctx, t.Repository, l.Inbox(), proxy)
	}, TransientGitError)
	if err != nil {
		return err
	}
	if t.Repository.Subpath != "" {
		if fi, err := os.Stat(l.Workdir(t)); err != nil || !fi.IsDir() {
			return job.Errorf(job.CodeSnapshotFailed, "repository.subpath %q is not a directory of the repository", t.Repository.Subpath)
		}
	}
	task := fmt.Sprintf("# %s\n\nTask id: %s\n\n## Instructions\n\n%s\n", t.Metadata.Name, t.Metadata.ID, strings.TrimSpace(t.Claude.Prompt))
	if err := os.WriteFile(filepath.Join(l.Workdir(t), "TASK.md"), []byte(task), 0o644); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write TASK.md")
	}
	// TASK.md is instructions, not part of the change the agent makes.
	exclude := "/" + filepath.ToSlash(filepath.Join(t.Repository.Subpath, "TASK.md"))
	if err := appendExclude(filepath.Join(l.Inbox(), ".git"), exclude); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write the exclude file")
	}
	return saveBase(ctx, l, exclude)
}

// saveBase fetches the staged commit from the inbox (still runner-owned:
// no agent has run) into base.git and records it as refs/heads/base.
func saveBase(ctx context.Context, l Layout, exclude string) error {
	if err := os.RemoveAll(l.Base()); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot clear base.git")
	}
	if _, err := git(ctx, "", "init", "--quiet", "--bare", l.Base()); err != nil {
		return err
	}
	if _, err := git(ctx, "", "--git-dir", l.Base(), "fetch", "--quiet", "--no-tags", "--depth", "1", l.Inbox(), "HEAD:refs/heads/base"); err != nil {
		return err
	}
	if err := appendExclude(l.Base(), exclude); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write the exclude file")
	}
	return nil
}

// clone fetches url@branch (and checks out commit) into dir. Without a
// pinned commit the clone is shallow.
func clone(ctx context.Context, r manifest.Repository, dir, proxy string) error {
	// --no-local: a local path would otherwise be cloned with hardlinks,
	// and the clone's object files would be the origin's own inodes, which
	// the sandbox's chown and the agent's writes then reach (the host
	// repository corrupted from inside a task). It also makes --depth
	// apply to local paths.
	args := []string{"clone", "--quiet", "--no-local"}
	if r.Branch != "" {
		// A task's manifest always names one (Clone's callers may not).
		args = append(args, "--branch", r.Branch)
	}
	var env []string
	if proxy != "" {
		// git's http.proxy beats the proxy variables; NO_PROXY would
		// still bypass it, so those are blanked.
		args = append([]string{"-c", "http.proxy=" + proxy}, args...)
		env = []string{"NO_PROXY=", "no_proxy=", "HTTPS_PROXY=", "https_proxy=", "HTTP_PROXY=", "http_proxy=", "ALL_PROXY=", "all_proxy="}
	}
	if r.Commit == "" {
		args = append(args, "--depth", "1")
	}
	if _, err := gitEnv(ctx, "", env, append(args, "--", r.URL, dir)...); err != nil {
		return err
	}
	if r.Commit != "" {
		if _, err := git(ctx, dir, "checkout", "--quiet", "--detach", r.Commit); err != nil {
			return err
		}
	}
	return nil
}

// hardening is passed to every git the runner starts: no hooks, no
// fsmonitor, no ext:: transport, whatever a repository's config says.
var hardening = []string{"-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never"}

// git runs git with a clean, non-interactive environment (PATH and the
// variables below, not the runner's environment: no credential helpers,
// proxies or GIT_* settings of the operator's shell reach it), without
// system or global configuration.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return gitEnv(ctx, dir, nil, args...)
}

func gitEnv(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	// Only staging runs git on the host, before any agent: the clone and
	// base.git are the runner's. Collection runs git in a sandbox (Collect).
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, hardening...), args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		sub := args[0]
		for i := 0; i+2 < len(args) && args[i] == "-c"; i += 2 {
			sub = args[i+2]
		}
		return nil, job.Errorf(job.CodeSnapshotFailed, "git %s: %s", sub, strings.TrimSpace(errb.String())).With("git", sub)
	}
	return out.Bytes(), nil
}

// emptyDir removes what dir holds, not dir itself: inbox/ may be the
// vm.disk mount point, which git clones into as it is.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func appendExclude(gitDir, pattern string) error {
	p := filepath.Join(gitDir, "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, pattern)
	return errors.Join(err, f.Close())
}
