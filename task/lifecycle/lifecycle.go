// Package lifecycle drives one agent task through seed 004's states:
// pending -> staging (clone, TASK.md) -> provisioning (token, secrets,
// sandbox) -> ready -> running (the agent) -> completing (patch, untracked
// list, artifact patterns, metadata.json) -> completed, failed or
// failed_preserved; cancellation from any active state. Every transition is
// checkpointed by package state before the next step starts. The agent
// and the collection run in one sandbox (sandbox.go), deleted before the
// task ends.
package lifecycle

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// Config is the operator's side of running tasks.
type Config struct {
	Backend     backend.Backend
	HangTimeout time.Duration
	// AllowHostNetwork lets vm.network_mode full (the host's network) run.
	AllowHostNetwork bool
	// Egress is the operator's gateway and ceiling: vm.network_mode
	// outbound reaches vm.allowed_hosts through it, and remote
	// repositories are cloned through it. Nil refuses both.
	Egress *egress.Operator
	// Env resolves env-sourced secrets (default os.Getenv).
	Env func(string) string
	// Secrets is the operator's secrets file: the only secrets a task may
	// be given (see Admit). Nil: a task that asks for any secret is
	// refused.
	Secrets *secretfile.File
	// Roots bounds local repository paths and file:// URLs (see Admit);
	// serve always sets it, nil leaves them unchecked (library use).
	Roots *workspaceroot.Roots
	// CloneBackoff is the git retry policy (default stage.CloneBackoff).
	CloneBackoff *stage.Backoff
	// Output, when set, receives the agent's scrubbed output of every
	// task run with this Config, as it is written to the progress logs,
	// with the task's id ("stdout" or "stderr"; one call at a time per
	// task): a worker sends it to the API node of a task it runs for
	// another host.
	Output func(taskID, stream string, p []byte)
	// HeartbeatEvery is the agent heartbeat interval (default 30 s).
	HeartbeatEvery time.Duration
	// Observer hears every transition (metrics); may be nil.
	Observer state.Observer
	// ChildSocket, when set, serves the children API of a running task
	// whose manifest has a children block, on a Unix socket authenticated
	// by the task's token (given as its SHA-256). It returns the socket's
	// host path and a stop function.
	ChildSocket func(parentID, tokenHash string) (string, func(), error)
	// ChildrenOf lists a task's children (wait_for_children,
	// aggregate_artifacts); the task store sets it.
	ChildrenOf func(parentID string) []state.Record
	// MaxArtifactFileBytes and MaxArtifactBytes cap the files copied for
	// lifecycle.artifact_patterns, per file and in total, counted on the
	// bytes read; a file over either is skipped and noted in events.jsonl
	// as artifact_skipped. Zero takes DefaultMaxArtifactFileBytes and
	// DefaultMaxArtifactBytes.
	MaxArtifactFileBytes int64
	MaxArtifactBytes     int64
	// Collect bounds the patch collection (in the task's sandbox, after
	// the agent; see taskSandbox); zero fields take stage's defaults.
	Collect stage.CollectLimits
	// Runner is the run service a task's sandboxed steps go through (the
	// agent, the patch collection, both processes of the task's sandbox
	// it opens), each recorded as a run: runs/<task_id>.agent and
	// runs/<task_id>.collect (runner.StepID).
	// Nil: a run store of the task's own (stage.StepRunner), opened for
	// the run.
	Runner *runner.Runner
	// Policy is the operator's policy for tasks (serve's --task-policy):
	// the agent command must pass it (agentstep.StepPolicy). Nil: each
	// task's own command is allowed (policy.Smallest).
	Policy *job.Policy
	// Logger hears what no record holds: a workspace, bridge or scratch
	// directory that cannot be removed, an event that cannot be written,
	// and Run's own failure, each once with the task's id (LogTaskID).
	// Nil discards.
	Logger *slog.Logger
}

// Default caps of the artifact_patterns copy (see Config).
const (
	DefaultMaxArtifactFileBytes = 100 << 20
	DefaultMaxArtifactBytes     = 1 << 30
)

// LimitDisk names the vm.disk quota in Metadata's enforcement lists.
const LimitDisk = "disk"

// Metadata is outbox/artifacts/metadata.json.
type Metadata struct {
	TaskID     string             `json:"task_id"`
	State      state.State        `json:"state"`
	ExitCode   *int               `json:"exit_code,omitempty"`
	Reason     string             `json:"reason"`
	Backend    string             `json:"backend"`
	StartedAt  time.Time          `json:"started_at"`
	EndedAt    time.Time          `json:"ended_at"`
	DurationMS int64              `json:"duration_ms"`
	Progress   agentstep.Progress `json:"progress"`
	// CPUSeconds and PeakMemoryBytes are the agent run's totals where the
	// backend measures them (linux_sandbox with cgroups).
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	PeakMemoryBytes int64   `json:"peak_memory_bytes,omitempty"`
	// Enforced and NotEnforced name the limits (job.Limit* and "disk")
	// that were or were not enforced; DiskNote says why a vm.disk quota
	// was not.
	Enforced    []string         `json:"enforced,omitempty"`
	NotEnforced []string         `json:"not_enforced,omitempty"`
	DiskNote    string           `json:"disk_note,omitempty"`
	Artifacts   []stage.Artifact `json:"artifacts"`
	TokenHash   string           `json:"token_sha256"`
	Children    []Child          `json:"children,omitempty"`
	Error       *job.Error       `json:"error,omitempty"`
	// StepRuns are the run records of the task's steps by step name
	// ("agent", "collect"): runs/<job_id> in the run store, readable as
	// jobs (GET /v1/jobs/<job_id>).
	StepRuns map[string]string `json:"step_runs,omitempty"`
}

// Run executes a submitted task whose directory and pending checkpoint
// exist (see state.Create). It returns the final metadata; the task's
// state.json holds the final state in every case but one: Run's error,
// which says the task's records could not be kept. Run logs that error
// through cfg.Logger; its caller need not log it again.
func Run(ctx context.Context, dir string, t *manifest.Task, manifestYAML []byte, cfg Config) (Metadata, error) {
	log := cfg.logger().With("component", "task", LogTaskID, t.Metadata.ID)
	md, err := run(ctx, dir, t, manifestYAML, cfg, log)
	if err != nil {
		log.Error("task run failed", "state", md.State, "error", err)
	}
	return md, err
}

func run(ctx context.Context, dir string, t *manifest.Task, manifestYAML []byte, cfg Config, log *slog.Logger) (Metadata, error) {
	m, err := state.Open(dir)
	if err != nil {
		return Metadata{}, err
	}
	m.Observe(cfg.Observer)
	l := stage.Layout{Dir: dir}
	md := Metadata{TaskID: t.Metadata.ID, StartedAt: time.Now().UTC(), Artifacts: []stage.Artifact{}}
	if cfg.Backend != nil {
		md.Backend = cfg.Backend.Kind()
	}
	// box is the task's sandbox once it is open (steps.go): deleted
	// before the task ends, and on a panic.
	var box taskSandbox
	defer box.close(log)
	// end records the outcome: metadata.json first, then the terminal
	// transition, so whoever sees the terminal state finds the metadata.
	end := func(to state.State, reason string, jerr *job.Error) (Metadata, error) {
		box.close(log)
		md.State, md.Error = to, jerr
		if to == state.Failed && t.Lifecycle.FailureAction != "preserve" {
			// destroy: the workspace goes, the outbox (logs, artifacts)
			// stays. What is left of it is the operator's to remove.
			if err := stage.RemoveWorkspace(l); err != nil {
				log.Warn("cannot remove the task's workspace", "error", err)
			}
		}
		out, err := finish(l, md)
		return out, errors.Join(err, m.Transition(to, reason, jerr))
	}
	fail := func(err error) (Metadata, error) {
		jerr := job.AsError(err)
		to := state.Failed
		if ctx.Err() != nil {
			to, jerr = state.Cancelled, job.Errorf(job.CodeRunCanceled, "task was cancelled")
			// A worker shutting down ends its context with a cause coded
			// run.interrupted: the task failed for that reason, nobody
			// cancelled it.
			if cause := context.Cause(ctx); job.CodeOf(cause) == job.CodeRunInterrupted {
				to, jerr = state.Failed, job.AsError(cause)
			}
		}
		return end(to, jerr.Message, jerr)
	}

	step := func(to state.State, reason string) error { return m.Transition(to, reason, nil) }
	if err := step(state.Staging, "cloning "+t.Repository.URL); err != nil {
		return md, err
	}
	if err := Admit(cfg, t); err != nil {
		return fail(err)
	}
	backoff := stage.CloneBackoff
	if cfg.CloneBackoff != nil {
		backoff = *cfg.CloneBackoff
	}
	var diskEnforced bool
	if size := t.DiskBytes(); size > 0 {
		if err := stage.MountQuota(ctx, l, size); err != nil {
			md.DiskNote = "vm.disk not enforced: " + err.Error()
		} else {
			diskEnforced = true
		}
	}
	net := newEgressRun(l, m, log)
	defer net.close()
	proxy, stopProxy, err := cloneProxy(ctx, cfg, t, net)
	if err != nil {
		return fail(err)
	}
	err = stage.StageThrough(ctx, l, t, manifestYAML, backoff, proxy)
	stopProxy()
	if err != nil {
		return fail(err)
	}
	if err := step(state.Provisioning, "sandbox "+md.Backend); err != nil {
		return md, err
	}
	token, hash, err := newToken()
	if err != nil {
		return fail(err)
	}
	md.TokenHash = hash
	secrets, err := resolveSecrets(t.Secrets, cfg.Secrets, cfg.Env)
	if err != nil {
		return fail(err)
	}
	bindings := bindSecrets(cfg, secrets)
	secrets["AGENT_TASK_TOKEN"] = token
	if cfg.Backend == nil {
		return fail(job.Errorf(job.CodeBackendUnavail, "no backend configured for tasks"))
	}
	if err := cfg.Backend.Available(ctx); err != nil {
		return fail(job.Wrap(job.CodeBackendUnavail, err, "task backend is unavailable"))
	}
	var runEnv, mounts []string
	if t.Children != nil && cfg.ChildSocket != nil {
		sock, stop, err := cfg.ChildSocket(t.Metadata.ID, hash)
		if err != nil {
			return fail(job.Wrap(job.CodeBackendSetupFailed, err, "cannot open the children socket"))
		}
		defer stop()
		runEnv, mounts = append(runEnv, "AGENT_RUNNER_SOCKET="+sock), append(mounts, filepath.Dir(sock))
	}
	if err := step(state.Ready, "sandbox ready"); err != nil {
		return md, err
	}
	if err := step(state.Running, "agent started"); err != nil {
		return md, err
	}
	network, bridge, stopNetwork, err := agentNetwork(ctx, cfg, t, bindings, net)
	if err != nil {
		return fail(err)
	}
	steps, closeSteps, err := stage.StepRunner(cfg.Runner, l)
	if err != nil {
		stopNetwork()
		return fail(err)
	}
	defer func() {
		if err := closeSteps(); err != nil {
			log.Warn("cannot close the task's step store", "error", err)
		}
	}()
	agentCfg := agentstep.Config{Backend: cfg.Backend, Runner: steps, Policy: cfg.Policy, HangTimeout: cfg.HangTimeout, Network: network, Egress: bridge, Output: taskOutput(cfg.Output, t.Metadata.ID), HeartbeatEvery: cfg.HeartbeatEvery, Env: runEnv, Mounts: mounts, Logger: log}
	if err := box.open(ctx, steps, l, t, cfg, &agentCfg); err != nil {
		stopNetwork()
		return fail(err)
	}
	out, err := agentstep.Run(ctx, l, t, secrets, agentCfg)
	// The collection needs no network: in the task's sandbox it finds
	// the bridge closed.
	stopNetwork()
	md.stepRun("agent", out.RunID)
	md.Progress, md.ExitCode, md.Reason = out.Progress, out.ExitCode, out.Reason
	md.CPUSeconds, md.PeakMemoryBytes = out.CPUTime.Seconds(), out.PeakMemoryBytes
	md.Enforced, md.NotEnforced = out.Enforced, out.NotEnforced
	switch {
	case diskEnforced:
		md.Enforced = append(md.Enforced, LimitDisk)
	case t.DiskBytes() > 0:
		md.NotEnforced = append(md.NotEnforced, LimitDisk)
	}
	if err != nil {
		return fail(err)
	}
	// collect takes the patch, the untracked list and the artifact
	// patterns, with a fresh context: a cancelled run still yields them.
	collect := func() error {
		c, err := box.collect(context.Background(), steps, l, t, cfg, log)
		md.stepRun("collect", c.RunID)
		files, skipped := collectPatterns(context.Background(), l, t, cfg.artifactCaps())
		md.Artifacts = append(append(md.Artifacts, c.Artifacts...), files...)
		noteSkipped(m, log, skipped)
		return err
	}
	if out.Reason == job.ReasonCanceled {
		// The task ends cancelled whatever the collection does; why its
		// changes are missing is told in events.jsonl.
		if err := collect(); err != nil {
			note(m, log, "artifact_skipped", "the task's changes ("+t.Metadata.ID+".patch): "+err.Error())
		}
		return fail(ctx.Err())
	}
	if err := step(state.Completing, "collecting changes"); err != nil {
		return md, err
	}
	if c := t.Children; c != nil && c.WaitForChildren && cfg.ChildrenOf != nil {
		if err := waitForChildren(ctx, m, log, t.Metadata.ID, cfg.ChildrenOf); err != nil {
			return fail(err)
		}
	}
	cerr := collect()
	if cfg.ChildrenOf != nil {
		md.Children = childSummaries(filepath.Dir(dir), cfg.ChildrenOf(t.Metadata.ID))
		if c := t.Children; c != nil && c.AggregateArtifacts {
			arts, skipped := aggregate(l, filepath.Dir(dir), md.Children)
			md.Artifacts = append(md.Artifacts, arts...)
			noteSkipped(m, log, skipped)
		}
	}
	switch {
	case cerr != nil:
		return fail(cerr)
	case out.ExitCode != nil && *out.ExitCode == 0 && out.Reason == job.ReasonExit:
		return end(state.Completed, "agent exited 0", nil)
	default:
		to := state.Failed
		if t.Lifecycle.FailureAction == "preserve" {
			to = state.FailedPreserved
		}
		jerr := job.Errorf(job.CodeRunExitNonzero, "agent ended: %s", describe(out)).With("reason", out.Reason)
		if out.Failure != "" {
			jerr.Message += ": " + out.Failure
		}
		return end(to, jerr.Message, jerr)
	}
}

// stepRun links a step's run record (none: nothing).
func (md *Metadata) stepRun(step, id string) {
	if id == "" {
		return
	}
	if md.StepRuns == nil {
		md.StepRuns = map[string]string{}
	}
	md.StepRuns[step] = id
}

func describe(o agentstep.Outcome) string {
	if o.ExitCode != nil {
		return o.Reason + " " + strconv.Itoa(*o.ExitCode)
	}
	return strings.TrimSpace(o.Reason + " " + o.Signal)
}

func finish(l stage.Layout, md Metadata) (Metadata, error) {
	md.EndedAt = time.Now().UTC()
	md.DurationMS = md.EndedAt.Sub(md.StartedAt).Milliseconds()
	b, _ := json.MarshalIndent(md, "", "  ") // plain data: always encodes
	if err := os.MkdirAll(l.Artifacts(), 0o700); err != nil {
		return md, job.Wrap(job.CodeRunIOFailed, err, "cannot write metadata.json")
	}
	if err := os.WriteFile(filepath.Join(l.Artifacts(), "metadata.json"), append(b, '\n'), 0o600); err != nil {
		return md, job.Wrap(job.CodeRunIOFailed, err, "cannot write metadata.json")
	}
	return md, nil
}

// newToken returns a 256-bit token and its SHA-256; only the hash is kept.
func newToken() (string, string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	tok := hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(tok))
	return tok, hex.EncodeToString(sum[:]), nil
}

// resolveSecrets reads each secret's value from its registration in the
// secrets file (Admit has checked that the manifest names it); the values
// go to the agent's environment and to the scrubber, nowhere else.
func resolveSecrets(refs []manifest.Secret, file *secretfile.File, env func(string) string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range refs {
		v, err := file.Value(s.Name, env)
		if err != nil {
			return nil, err
		}
		out[s.Name] = v
	}
	return out, nil
}

// collectPatterns copies lifecycle.artifact_patterns matches from the
// workspace into outbox/artifacts with checksums, and returns the matches
// it skipped with the reason. Patterns are slash-separated globs where
// "**" spans any number of directories. The agent wrote the workspace, so
// it is walked and read through package safecopy: no symlink is followed
// in any component (the workdir itself included), a link pointing out of
// the workspace yields nothing, only regular files are opened (a FIFO or
// device is never blocked on), .git is skipped, and each file is cut off
// at the caps on the bytes actually read (a sparse 8 GiB file is skipped,
// not copied).
func collectPatterns(ctx context.Context, l stage.Layout, t *manifest.Task, caps artifactCaps) ([]stage.Artifact, []string) {
	if len(t.Lifecycle.ArtifactPatterns) == 0 {
		return nil, nil
	}
	root, err := safecopy.OpenRoot(l.Inbox())
	if err != nil {
		return nil, []string{"workspace: " + err.Error()}
	}
	defer root.Close()
	if sub := t.Repository.Subpath; sub != "" && sub != "." {
		inner, err := root.Sub(sub)
		if err != nil {
			return nil, []string{"workspace: " + err.Error()}
		}
		defer inner.Close()
		root = inner
	}
	budget := &safecopy.Budget{MaxBytes: caps.total}
	var out []stage.Artifact
	var skipped []string
	err = root.Walk(ctx, func(name string, info safecopy.Info) error {
		if info.Mode.IsDir() {
			if path.Base(name) == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !info.Mode.IsRegular() {
			return nil // symlinks, devices, fifos
		}
		for _, pat := range t.Lifecycle.ArtifactPatterns {
			if matchGlob(pat, name) {
				a, err := copyArtifactAs(ctx, root, name, filepath.Join(l.Artifacts(), "files"), "files/", caps.file, budget)
				if err != nil {
					skipped = append(skipped, skipReason("files/"+name, err, caps))
					break
				}
				out = append(out, a)
				break
			}
		}
		return nil
	})
	if err != nil {
		skipped = append(skipped, "workspace walk stopped: "+err.Error())
	}
	return out, skipped
}

// artifactCaps are the effective artifact_patterns caps of a Config.
type artifactCaps struct{ file, total int64 }

func (c Config) artifactCaps() artifactCaps {
	caps := artifactCaps{file: c.MaxArtifactFileBytes, total: c.MaxArtifactBytes}
	if caps.file <= 0 {
		caps.file = DefaultMaxArtifactFileBytes
	}
	if caps.total <= 0 {
		caps.total = DefaultMaxArtifactBytes
	}
	return caps
}

func skipReason(name string, err error, caps artifactCaps) string {
	switch {
	case errors.Is(err, safecopy.ErrTooLarge):
		// The cap in force was the smaller of the two.
		return name + ": over max_artifact_file_bytes (" + strconv.FormatInt(caps.file, 10) +
			") or what is left of max_artifact_bytes (" + strconv.FormatInt(caps.total, 10) + ")"
	case errors.Is(err, safecopy.ErrNotRegular), errors.Is(err, safecopy.ErrSymlink):
		return name + ": no longer a regular file inside the workspace"
	}
	return name + ": " + err.Error()
}

// maxSkipNotes bounds the artifact_skipped events one task writes; the
// rest are counted in one last note.
const maxSkipNotes = 20

// noteSkipped records skipped artifacts in events.jsonl.
func noteSkipped(m *state.Machine, log *slog.Logger, skipped []string) {
	for i, s := range skipped {
		if i == maxSkipNotes {
			note(m, log, "artifact_skipped", strconv.Itoa(len(skipped)-i)+" more artifacts skipped")
			return
		}
		note(m, log, "artifact_skipped", s)
	}
}

// matchGlob matches a slash-separated name against a pattern whose "**"
// segments match zero or more directories.
func matchGlob(pattern, name string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegments(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		// Patterns are checked at submit (manifest.Parse): no ErrBadPattern.
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// copyArtifactAs copies the regular file name beneath root into dstDir,
// within fileCap and what is left of b (nil: fileCap alone), and names the
// artifact prefix+name. Nothing is left at the destination on error.
func copyArtifactAs(ctx context.Context, root *safecopy.Root, name, dstDir, prefix string, fileCap int64, b *safecopy.Budget) (stage.Artifact, error) {
	if b == nil {
		b = &safecopy.Budget{}
	}
	limit, err := b.Limit(fileCap)
	if err != nil {
		return stage.Artifact{}, err
	}
	dst := filepath.Join(dstDir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return stage.Artifact{}, err
	}
	c, err := root.CopyFile(ctx, name, dst, 0o600, limit)
	if err != nil {
		return stage.Artifact{}, err
	}
	b.Take(c.Size)
	return stage.Artifact{Name: prefix + name, SizeBytes: c.Size, SHA256: c.SHA256}, nil
}

// taskOutput binds an Output hook to one task (nil stays nil).
func taskOutput(out func(taskID, stream string, p []byte), id string) func(stream string, p []byte) {
	if out == nil {
		return nil
	}
	return func(stream string, p []byte) { out(id, stream, p) }
}
