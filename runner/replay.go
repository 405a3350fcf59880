package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/snapshot"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
)

// Check compares one reproducible property of two runs.
type Check struct {
	Original any  `json:"original"`
	Replay   any  `json:"replay"`
	Match    bool `json:"match"`
}

// ReplayReport says whether a stored run reproduced.
type ReplayReport struct {
	OriginalJobID string `json:"original_job_id"`
	ReplayJobID   string `json:"replay_job_id"`
	// WorkspaceSource is "snapshot" when the stored snapshot verified
	// against its manifest, "workspace" when the original workspace still
	// hashed the same, or "" when neither did (the replay did not run).
	WorkspaceSource string           `json:"workspace_source"`
	Reproduced      bool             `json:"reproduced"`
	Checks          map[string]Check `json:"checks"`
	Result          *job.Result      `json:"result,omitempty"`
	Error           *job.Error       `json:"error,omitempty"`
}

// Replay re-runs the request stored in runDir on the workspace state it
// originally ran on and compares exit code, output and artifact hashes.
// Read-only mounts are not part of the snapshot: they are bound from the
// original workspace as it is now, and their digest is compared (the
// readonly_mounts_sha256 check) rather than restored.
//
// The stored snapshot/ may have been changed by the job itself, so the
// files listed in snapshot.json are copied out and verified against their
// recorded hashes first; if that fails, the original workspace path is used
// when it still hashes the same. The replay is a new job in r's store.
func (r *Runner) Replay(ctx context.Context, runDir string) (ReplayReport, error) {
	rep := ReplayReport{Checks: map[string]Check{}}
	old, err := readRun(runDir)
	if err != nil {
		return rep, err
	}
	rep.OriginalJobID = old.res.JobID
	src, kind, err := r.replayWorkspace(ctx, runDir, old)
	if job.CodeOf(err) == job.CodeSnapshotFailed {
		rep.Error = job.AsError(err)
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	if kind == "snapshot" {
		defer r.removeReplayDir(src, rep.OriginalJobID)
	}
	rep.WorkspaceSource = kind
	req := old.req
	req.JobID = NewJobID()
	// The restored tree holds only the selected entries, but it keeps the
	// include and exclude globs: the digest depends on them (with includes,
	// directories are parents only and not listed), so dropping them hashed
	// the restored parents and no replay with globs reproduced.
	req.Workspace.Path = src
	opts := Options{Attempt: 1}
	if kind == "workspace" {
		req.Workspace = old.req.Workspace
	} else if len(req.Workspace.ReadOnlyMounts) > 0 {
		// The snapshot never held the read-only mounts: they are bound
		// from the original workspace again, over empty mount points.
		opts.MountRoot = old.req.Workspace.Path
		for _, m := range req.Workspace.ReadOnlyMounts {
			if err := os.MkdirAll(filepath.Join(src, filepath.FromSlash(m)), 0o755); err != nil {
				return rep, job.Wrap(job.CodeRunIOFailed, err, "cannot create a read-only mount point")
			}
		}
	}
	res, err := r.Run(ctx, req, opts)
	if err != nil {
		return rep, err
	}
	rep.ReplayJobID = res.JobID
	rep.Result = &res
	rep.Checks["exit_code"] = check(old.res.ExitCode, res.ExitCode, intEq(old.res.ExitCode, res.ExitCode))
	rep.Checks["status"] = check(old.res.Status, res.Status, old.res.Status == res.Status)
	rep.Checks["stdout_sha256"] = check(old.res.Stdout.SHA256, res.Stdout.SHA256, old.res.Stdout.SHA256 == res.Stdout.SHA256)
	rep.Checks["stderr_sha256"] = check(old.res.Stderr.SHA256, res.Stderr.SHA256, old.res.Stderr.SHA256 == res.Stderr.SHA256)
	rep.Checks["workspace_snapshot_sha256"] = check(old.res.Replay.WorkspaceSnapshotSHA256, res.Replay.WorkspaceSnapshotSHA256,
		old.res.Replay.WorkspaceSnapshotSHA256 == res.Replay.WorkspaceSnapshotSHA256)
	if o, n := old.res.Replay.ReadOnlyMountsSHA256, res.Replay.ReadOnlyMountsSHA256; o != "" || n != "" {
		rep.Checks["readonly_mounts_sha256"] = check(o, n, o == n)
	}
	oa, na := artifactSums(old.res.Artifacts), artifactSums(res.Artifacts)
	rep.Checks["artifacts"] = check(oa, na, mapsEqual(oa, na))
	rep.Reproduced = true
	for _, c := range rep.Checks {
		rep.Reproduced = rep.Reproduced && c.Match
	}
	return rep, nil
}

type storedRun struct {
	req job.Request
	res job.Result
}

func readRun(runDir string) (storedRun, error) {
	var run storedRun
	for name, v := range map[string]any{store.RequestFile: &run.req, store.ResultFile: &run.res} {
		b, err := os.ReadFile(filepath.Join(runDir, name))
		if err != nil {
			return run, job.Wrap(job.CodeJobNotFound, err, "run directory has no "+name).With("run", runDir)
		}
		if err := json.Unmarshal(b, v); err != nil {
			return run, job.Wrap(job.CodeRunIOFailed, err, "corrupt "+name).With("run", runDir)
		}
	}
	return run, nil
}

// replayWorkspace returns a directory holding the original workspace
// state and where it came from, or a run.snapshot_failed error saying why
// neither the stored snapshot nor the original workspace can be used. The
// stored snapshot is read through snapshot.Restore, which refuses FIFOs,
// devices, symlinked components and files past the recorded bytes, so a
// snapshot the job booby-trapped ends the replay with that error instead
// of hanging it.
func (r *Runner) replayWorkspace(ctx context.Context, runDir string, old storedRun) (string, string, error) {
	want := old.res.Replay.WorkspaceSnapshotSHA256
	var restoreErr error
	if b, err := os.ReadFile(filepath.Join(runDir, SnapshotManifestFile)); err == nil {
		var m snapshot.Manifest
		src := filepath.Join(runDir, store.SnapshotDir)
		if json.Unmarshal(b, &m) == nil && m.Lower != "" {
			// Overlay: the lower layer is the pristine workspace state.
			src = m.Lower
			if full, err := snapshot.LayerManifest(m.Lower); err == nil {
				m = full
			}
		}
		if m.SHA256 == want {
			tmp, err := os.MkdirTemp(r.store.Dir(), ".replay-")
			if err != nil {
				return "", "", job.Wrap(job.CodeRunIOFailed, err, "cannot create replay workspace")
			}
			restoreErr = snapshot.Restore(ctx, src, tmp, m)
			if restoreErr == nil {
				return tmp, "snapshot", nil
			}
			r.removeReplayDir(tmp, old.res.JobID)
			if ctx.Err() != nil {
				return "", "", job.Wrap(job.CodeRunCanceled, ctx.Err(), "replay canceled")
			}
		}
	}
	var hashErr error
	if old.req.Workspace.Path != "" && want != "" {
		got, err := snapshot.Hash(ctx, old.req.Workspace.Path, snapshot.Options{Include: old.req.Workspace.Include, Exclude: mountExcludes(old.req.Workspace)})
		if err == nil && got == want {
			return old.req.Workspace.Path, "workspace", nil
		}
		hashErr = err
	}
	const msg = "neither the stored snapshot nor the original workspace matches workspace_snapshot_sha256"
	// The snapshot's failure says more than the workspace's (which may
	// simply have changed since).
	if restoreErr != nil {
		return "", "", job.Wrap(job.CodeSnapshotFailed, restoreErr, msg)
	}
	if hashErr != nil {
		return "", "", job.Wrap(job.CodeSnapshotFailed, hashErr, msg)
	}
	return "", "", job.Errorf(job.CodeSnapshotFailed, msg)
}

// removeReplayDir removes a restored snapshot once the replay is done
// with it. The replay's report does not depend on it; a restored tree
// left in the store is the operator's to remove.
func (r *Runner) removeReplayDir(dir, originalJobID string) {
	if err := os.RemoveAll(dir); err != nil {
		r.log.Warn("cannot remove a replay's restored workspace", telemetry.KeyJobID, originalJobID, "dir", dir, "error", err)
	}
}

func check(a, b any, match bool) Check { return Check{Original: a, Replay: b, Match: match} }

func intEq(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func artifactSums(as []job.Artifact) map[string]string {
	m := map[string]string{}
	for _, a := range as {
		m[a.Path] = a.SHA256
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
