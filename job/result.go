package job

import "time"

// Result is a RunJobResult: the same shape from every door.
type Result struct {
	JobID          string      `json:"job_id"`
	Status         Status      `json:"status"`
	Backend        string      `json:"backend"`
	StartedAt      time.Time   `json:"started_at"`
	EndedAt        time.Time   `json:"ended_at"`
	DurationMS     int64       `json:"duration_ms"`
	Command        CommandEcho `json:"command"`
	ExitCode       *int        `json:"exit_code"`
	Stdout         Output      `json:"stdout"`
	Stderr         Output      `json:"stderr"`
	Artifacts      []Artifact  `json:"artifacts"`
	Replay         Replay      `json:"replay"`
	PolicyDecision Decision    `json:"policy_decision"`
	Error          *Error      `json:"error,omitempty"`
	// Extensions (docs/api.md).
	Trace       Trace        `json:"trace,omitempty"`
	Termination *Termination `json:"termination,omitempty"`
	Usage       *Usage       `json:"usage,omitempty"`
	Enforcement *Enforcement `json:"enforcement,omitempty"`
	Attempt     int          `json:"attempt,omitempty"`
	// ArtifactsSkipped are matched files left out because they did not
	// fit the artifact caps; the job's status does not change.
	ArtifactsSkipped []SkippedArtifact `json:"artifacts_skipped,omitempty"`
	// ExecDenials are the execs inside the job that its policy refused
	// (a shell under allow_shell false, a program off the list under
	// exec_scope every_process), the first MaxExecDenials of them;
	// ExecDenialsTotal counts them all. The kernel refused them; what
	// the job did about it is its own.
	ExecDenials      []ExecDenial `json:"exec_denials,omitempty"`
	ExecDenialsTotal int          `json:"exec_denials_total,omitempty"`
	// Sandbox, when set, is the id of the kept sandbox the job ran in as
	// one of its processes (a task's steps share the task's sandbox,
	// "<task_id>.sandbox"); absent for a job in a sandbox of its own.
	Sandbox string `json:"sandbox,omitempty"`
}

// MaxExecDenials caps Result.ExecDenials.
const MaxExecDenials = 100

// ExecDenial is one exec the job's policy refused inside the job.
type ExecDenial struct {
	// Path is the program the exec named, absolute inside the sandbox.
	Path string `json:"path"`
	// Interpreter, when set, is the refused #! interpreter of Path (a
	// script), which is what the kernel refused.
	Interpreter string `json:"interpreter,omitempty"`
	// Argv0 is the argv[0] the exec passed, when it could be read.
	Argv0 string `json:"argv0,omitempty"`
	// PID is the calling process in the sandbox's pid namespace.
	PID  int       `json:"pid,omitempty"`
	Time time.Time `json:"time"`
}

// Reasons an artifact was skipped: the limit it did not fit.
const (
	SkipMaxArtifactCount     = "max_artifact_count"
	SkipMaxArtifactFileBytes = "max_artifact_file_bytes"
	SkipMaxArtifactBytes     = "max_artifact_bytes"
	// SkipMaxRunRecordBytes: the total artifact budget was smaller than
	// max_artifact_bytes because output filled max_run_record_bytes.
	SkipMaxRunRecordBytes = "max_run_record_bytes"
	// SkipGrewPastCap: the file grew past what the caps still allowed
	// while it was copied.
	SkipGrewPastCap = "grew_past_cap"
)

// SkippedArtifact is a matched file that was not collected.
type SkippedArtifact struct {
	Path      string `json:"path"`
	Reason    string `json:"reason"`
	SizeBytes int64  `json:"size_bytes"`
	// Limit is the cap it did not fit, in the unit of the reason.
	Limit int64 `json:"limit"`
}

// CommandEcho repeats the argv and cwd that ran.
type CommandEcho struct {
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd"`
}

// Output is one captured stream. Text holds the retained bytes (at most the
// stream's cap); SHA256 covers every byte the process wrote, retained or not,
// so a replay can compare complete output. When the retained bytes are not
// valid UTF-8, Text is a lossy rendering and Base64 holds the exact bytes.
type Output struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
	SHA256    string `json:"sha256"`
	// Extensions.
	TotalBytes int64  `json:"total_bytes"`
	Base64     string `json:"base64,omitempty"`
}

// Artifact is one collected file.
type Artifact struct {
	Path       string `json:"path"`
	Kind       string `json:"kind"`
	SizeBytes  int64  `json:"size_bytes"`
	SHA256     string `json:"sha256"`
	StorageURI string `json:"storage_uri"`
}

// Replay holds the hashes that identify a run.
type Replay struct {
	RequestSHA256           string `json:"request_sha256"`
	WorkspaceSnapshotSHA256 string `json:"workspace_snapshot_sha256"`
	ResultSHA256            string `json:"result_sha256"`
	// ReadOnlyMountsSHA256 identifies the state of the request's
	// readonly_mounts (not part of the snapshot): paths, file kinds, sizes
	// and modification times, not contents. Extension.
	ReadOnlyMountsSHA256 string `json:"readonly_mounts_sha256,omitempty"`
}

// Decision is the policy outcome.
type Decision struct {
	Action        string   `json:"action"`
	PolicyVersion string   `json:"policy_version"`
	Messages      []string `json:"messages"`
}

// Policy actions.
const (
	ActionAllow = "allow"
	ActionDeny  = "deny"
)

// Termination reasons.
const (
	ReasonExit     = "exit"
	ReasonSignal   = "signal"
	ReasonTimeout  = "timeout"
	ReasonOOM      = "oom"
	ReasonCanceled = "canceled"
)

// Termination says how the process ended.
type Termination struct {
	Reason string `json:"reason"`
	Signal string `json:"signal,omitempty"`
}

// Usage is the resource use a backend measured, when it can.
type Usage struct {
	CPUTimeMS       int64 `json:"cpu_time_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
}

// Enforcement lists which limits the backend enforced and which it only
// recorded, so a caller never mistakes intent for a boundary.
type Enforcement struct {
	Enforced    []string `json:"enforced"`
	NotEnforced []string `json:"not_enforced"`
}

// Limit names used in Enforcement.
const (
	LimitTimeout   = "timeout"
	LimitOutput    = "output"
	LimitNetwork   = "network"
	LimitMemory    = "memory"
	LimitCPU       = "cpu"
	LimitProcesses = "processes"
	LimitFSWrite   = "filesystem_write"
	LimitFSRead    = "filesystem_read"
	// LimitDisk: limits.disk_mb and disk_inodes (listed only for a job
	// that has them).
	LimitDisk = "disk"
	// Walls of an isolating backend beyond the request's limits, listed
	// so a kernel that lacks one shows up in not_enforced.
	//
	// LimitSyscalls: the seccomp allow-list (foreign ABIs killed).
	LimitSyscalls = "syscalls"
	// LimitLandlock: Landlock, the second filesystem wall behind the
	// mounts (not enforced on kernels without it).
	LimitLandlock = "landlock"
	// LimitHostIDs: a host uid/gid range of the sandbox's own, so kernel
	// per-uid accounts never couple two jobs (needs a root runner).
	LimitHostIDs = "host_ids"
	// LimitShells: policy.allow_shell false held at every exec in the
	// job, not only on the command line (listed only for a job whose
	// policy denies shells).
	LimitShells = "shells"
)
