package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agent-runner/agent-runner/client"
)

// agentScript is the trivial agent: it prints a line and exits 0.
const agentScript = "echo hello from the load agent\n"

// origin makes the task repository <dir>/origin: agent.sh in one commit on
// branch main.
func origin(dir string) (string, error) {
	repo := filepath.Join(dir, "origin")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(repo, "agent.sh"), []byte(agentScript), 0o755); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main"},
		{"add", "."},
		{"commit", "--quiet", "-m", "load agent"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=load", "GIT_AUTHOR_EMAIL=load@localhost", "GIT_COMMITTER_NAME=load", "GIT_COMMITTER_EMAIL=load@localhost")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return repo, nil
}

// taskManifest is a task that runs agent.sh of repo. The repository is
// named by a file:// URL: git clones a plain local path with hardlinks, so
// the task's clone would share its object files with the origin, and on
// linux_sandbox the staging chown of the clone changes the origin's
// objects too (concurrent clones then fail "hardlink different from
// source", see README.md).
func taskManifest(id, repo string) string {
	return `version: "1"
kind: Task
metadata: {id: ` + id + `, name: load}
repository: {url: "file://` + repo + `", branch: main}
claude: {prompt: "print a line"}
agent: {command: ["/bin/sh", "agent.sh"]}
`
}

// runTask submits the manifest and polls the task every b.TaskPoll until
// it is terminal, for at most b.Timeout; it fails unless the task completed, and on another backend
// than kind. (The state turns terminal a moment before metadata.json,
// which names the backend, is written: a poll may see no metadata yet.)
func (b *bench) runTask(c *client.Client, id, manifest, kind string) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	if _, err := c.SubmitTask(ctx, []byte(manifest)); err != nil {
		return fmt.Errorf("submit task %s: %w", id, err)
	}
	t, err := c.WaitTask(ctx, id, b.TaskPoll)
	if err != nil {
		return fmt.Errorf("task %s (%s): %w", id, t.State, err)
	}
	if t.State != "completed" {
		return fmt.Errorf("task %s: %s, want completed (error %v)", id, t.State, t.Error)
	}
	if t.Metadata != nil && t.Metadata.Backend != kind {
		return fmt.Errorf("task %s ran on %q, want %s", id, t.Metadata.Backend, kind)
	}
	return nil
}

// taskMode measures trivial agent tasks on backend kind at each task level.
func (b *bench) taskMode(kind string) error {
	repo, err := origin(filepath.Join(b.dir, "task-"+kind))
	if err != nil {
		return err
	}
	args := append(backendArgs(kind), "--task-backend", kind)
	s, err := b.startServe(b.store("task-"+kind), args...)
	if err != nil {
		return err
	}
	defer s.stop()
	fmt.Fprintf(b.Out, "== task (%s): agent `/bin/sh agent.sh` printing one line, serve %v, %d tasks per level, status polled every %s\n",
		kind, args, b.Tasks, b.TaskPoll)
	if err := b.runTask(s.client, "warm-up", taskManifest("warm-up", repo), kind); err != nil {
		return err
	}
	printHeader(b.Out, "tasks")
	for _, conc := range b.TaskLevels {
		smp, err := measure(conc, b.Tasks, func(i int) error {
			id := fmt.Sprintf("load-c%d-%d", conc, i)
			return b.runTask(s.client, id, taskManifest(id, repo), kind)
		})
		if err != nil {
			return err
		}
		printRow(b.Out, smp.summary())
	}
	m, err := s.memory()
	if err != nil {
		return err
	}
	fmt.Fprintf(b.Out, "serve RSS after the levels: %s\n", m)
	return nil
}
