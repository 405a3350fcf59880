package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// Artifact is one collected file with its checksum.
type Artifact struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

// Collection defaults (see CollectLimits).
const (
	DefaultCollectTimeout  = 5 * time.Minute
	DefaultCollectMemory   = 1 << 30
	DefaultCollectMaxBytes = 100 << 20
)

// CollectLimits bound the sandbox Collect runs git in. Zero fields take
// the defaults.
type CollectLimits struct {
	// Timeout ends the collection (default 5 min).
	Timeout time.Duration
	// MemoryBytes is the sandbox's memory limit and git's address space
	// (default 1 GiB): a file too big to map fails the collection.
	MemoryBytes int64
	// MaxBytes caps the patch and the untracked list each (default 100
	// MiB); over it the collection fails, it never keeps a partial patch.
	MaxBytes int64
}

func (c CollectLimits) withDefaults() CollectLimits {
	if c.Timeout <= 0 {
		c.Timeout = DefaultCollectTimeout
	}
	if c.MemoryBytes <= 0 {
		c.MemoryBytes = DefaultCollectMemory
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultCollectMaxBytes
	}
	return c
}

// Collection is what Collect wrote, and the run id of its step's record.
type Collection struct {
	Artifacts []Artifact
	RunID     string
}

// Collect is CollectOn with no run service: the collection's record
// goes to the task's own step store (StepRunner).
func Collect(ctx context.Context, l Layout, t *manifest.Task, b backend.Backend, lim CollectLimits, log *slog.Logger) ([]Artifact, error) {
	c, err := CollectOn(ctx, nil, l, t, b, lim, log)
	return c.Artifacts, err
}

// CollectOn writes <id>.patch (git diff --binary against the staged
// commit, new files and the agent's own commits included) and
// <id>-untracked.txt to outbox/artifacts and returns them with
// checksums.
//
// Git walking the agent's tree is agent-controlled input: nested
// repositories make git run `git status` inside them with their own
// config (filters, fsmonitor), attributes name drivers, huge or sparse
// files and deep trees take unbounded time and memory. So git never runs
// on the host: the collection is a step of the run service r (recorded
// as runs/<task_id>.collect; nil r: see StepRunner) on b (the backend
// the agent ran on), in a sandbox of its own over the inbox, as the
// sandbox's uid, under lim, with the runner's base.git read-only as the
// repository and a fresh scratch directory for the index and the
// outputs. The host only reads the two output files, refusing anything
// but a regular file and reading no more than the cap. CollectIn runs
// the same collection in the task's sandbox instead.
//
// The scratch directory holds the agent's data; one that cannot be
// removed afterwards is logged to log (nil: not logged), it does not fail
// the collection.
func CollectOn(ctx context.Context, r *runner.Runner, l Layout, t *manifest.Task, b backend.Backend, lim CollectLimits, log *slog.Logger) (Collection, error) {
	if b == nil {
		return Collection{}, job.Errorf(job.CodeBackendUnavail, "no backend to collect the task's changes in")
	}
	sc, err := NewCollectScratch(l)
	if err != nil {
		return Collection{}, err
	}
	defer sc.Remove(log)
	ro, rw := sc.Binds()
	// The scratch directory is the collection's own: its outputs go
	// straight into it.
	return collectStep(ctx, r, l, t, sc.sc.out, lim, runner.Options{ReadOnly: ro, Writable: rw, Step: &runner.Step{Backend: b}}, log)
}

// CollectIn is CollectOn as one process of the task's sandbox sb, which
// was opened with sc's Binds: its view, network and limits are the
// sandbox's (collectScript's own caps, lim's timeout and the fixed
// collection policy still hold for this process), so the collection
// sees the sandbox as the agent left it.
//
// The agent saw the scratch directory (bound since the sandbox was
// made): the outputs go to a fresh directory in it, made now.
func CollectIn(ctx context.Context, r *runner.Runner, l Layout, t *manifest.Task, sb *runner.Sandbox, sc *CollectScratch, lim CollectLimits, log *slog.Logger) (Collection, error) {
	dir, err := sc.sc.dir()
	if err != nil {
		return Collection{}, job.Wrap(job.CodeRunIOFailed, err, "cannot create the collection's output directory")
	}
	return collectStep(ctx, r, l, t, dir, lim, runner.Options{Step: &runner.Step{Sandbox: sb}}, log)
}

// CollectScratch is the collection's scratch directory and base.git,
// made readable to the sandbox: what a sandbox that collects binds.
type CollectScratch struct {
	sc   scratch
	base string
}

// NewCollectScratch makes the scratch directory of l's collection and
// shares base.git with the sandbox's uid. Remove removes it.
func NewCollectScratch(l Layout) (*CollectScratch, error) {
	sc, err := newScratch()
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the collection's scratch directory")
	}
	if err := shareBase(l.Base()); err != nil {
		sc.remove()
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot make base.git readable to the sandbox")
	}
	return &CollectScratch{sc: sc, base: l.Base()}, nil
}

// Binds are the host directories a collecting sandbox sees at their own
// paths: base.git read-only, the scratch directory writable.
func (c *CollectScratch) Binds() (readOnly, writable []string) {
	return []string{c.base}, []string{c.sc.out}
}

// Remove removes the scratch directory; one that cannot be removed is
// logged to log (nil: not logged).
func (c *CollectScratch) Remove(log *slog.Logger) {
	if err := c.sc.remove(); err != nil && log != nil {
		log.Warn("cannot remove the collection's scratch directory", "dir", c.sc.parent, "error", err)
	}
}

// collectStep runs collectScript as a step with opts (its Wrap is set
// here), its outputs going to dir, and writes what it collected.
func collectStep(ctx context.Context, r *runner.Runner, l Layout, t *manifest.Task, dir string, lim CollectLimits, opts runner.Options, log *slog.Logger) (Collection, error) {
	var c Collection
	lim = lim.withDefaults()
	r, closeRunner, err := StepRunner(r, l)
	if err != nil {
		return c, job.Wrap(job.CodeArtifactFailed, err, "cannot open the run store of the collection")
	}
	defer func() {
		if err := closeRunner(); err != nil && log != nil {
			log.Warn("cannot close the task's step store", "error", err)
		}
	}()
	stderr := &tailBuffer{max: 4 << 10}
	opts.Step.Wrap = func(stream string, capture io.Writer) io.Writer {
		if stream == "stderr" {
			return io.MultiWriter(capture, stderr)
		}
		return capture
	}
	res, err := r.Step(ctx, collectRequest(l, t, dir, lim), opts)
	if err != nil {
		return c, job.Wrap(job.CodeArtifactFailed, err, "cannot start the collection sandbox")
	}
	c.RunID = res.JobID
	if res.Termination == nil {
		if res.Error == nil {
			return c, job.Errorf(job.CodeArtifactFailed, "the collection sandbox ended without running")
		}
		return c, job.Wrap(job.CodeArtifactFailed, res.Error, "cannot start the collection sandbox")
	}
	out := backend.Outcome{ExitCode: res.ExitCode, Reason: res.Termination.Reason, Signal: res.Termination.Signal}
	// Over the cap first: a killed git (the file-size limit) is not a
	// failure to report as such.
	bufs, errs := readOutputs(ctx, dir, lim.MaxBytes, "untracked", "patch")
	untracked, patch, uerr, perr := bufs[0], bufs[1], errs[0], errs[1]
	if errors.Is(uerr, safecopy.ErrTooLarge) || errors.Is(perr, safecopy.ErrTooLarge) {
		return c, overCap(lim, "")
	}
	if err := outcomeError(out, lim, stderr.String()); err != nil {
		return c, err
	}
	for _, e := range []error{uerr, perr} {
		if e != nil {
			return c, job.Wrap(job.CodeArtifactFailed, e, "cannot read the collection's output")
		}
	}
	files := splitNUL(untracked)
	outs := []struct {
		name string
		b    []byte
	}{
		{t.Metadata.ID + ".patch", patch},
		{t.Metadata.ID + "-untracked.txt", []byte(strings.Join(files, "\n") + newlineIf(len(files) > 0))},
	}
	for _, o := range outs {
		if err := os.WriteFile(filepath.Join(l.Artifacts(), o.name), o.b, 0o600); err != nil {
			return c, job.Wrap(job.CodeArtifactFailed, err, "cannot write "+o.name)
		}
		sum := sha256.Sum256(o.b)
		c.Artifacts = append(c.Artifacts, Artifact{Name: o.name, SizeBytes: int64(len(o.b)), SHA256: hex.EncodeToString(sum[:])})
	}
	return c, nil
}

// exitOverCap is collectScript's exit status for a new file over the cap.
const exitOverCap = 3

// overCap is the error of changes too big to collect; detail says which
// file, where the script named it.
func overCap(lim CollectLimits, detail string) error {
	msg := fmt.Sprintf("the task's changes are over the %d-byte collection cap; no patch was kept", lim.MaxBytes)
	if detail = strings.TrimSpace(detail); detail != "" {
		msg += " (" + detail + ")"
	}
	return job.Errorf(job.CodeArtifactFailed, "%s", msg).With("limit_bytes", lim.MaxBytes)
}

// outcomeError says why the collection sandbox did not exit 0.
func outcomeError(out backend.Outcome, lim CollectLimits, stderr string) error {
	switch {
	case out.Reason == job.ReasonTimeout:
		return job.Errorf(job.CodeArtifactFailed, "collecting the task's changes timed out after %s", lim.Timeout).With("limit", "timeout")
	case out.Reason == job.ReasonOOM:
		return job.Errorf(job.CodeArtifactFailed, "collecting the task's changes ran out of its %d bytes of memory", lim.MemoryBytes).With("limit", "memory")
	case out.ExitCode != nil && *out.ExitCode == 0:
		return nil
	case out.ExitCode != nil && *out.ExitCode == exitOverCap:
		return overCap(lim, stderr)
	}
	how := out.Reason + " " + out.Signal
	if out.ExitCode != nil {
		how = "exit " + strconv.Itoa(*out.ExitCode)
	}
	return job.Errorf(job.CodeArtifactFailed, "collecting the task's changes failed (%s): %s", strings.TrimSpace(how), strings.TrimSpace(stderr))
}

func splitNUL(b []byte) []string {
	var files []string
	for _, f := range strings.Split(string(b), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

func newlineIf(b bool) string {
	if b {
		return "\n"
	}
	return ""
}
