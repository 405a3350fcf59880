package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Request is a RunJobRequest (seed 000/002). Unknown fields are rejected by
// DecodeRequest.
type Request struct {
	JobID     string      `json:"job_id,omitempty"`
	Trace     Trace       `json:"trace,omitempty"`
	Workspace Workspace   `json:"workspace"`
	Command   Command     `json:"command"`
	Policy    Policy      `json:"policy"`
	Limits    Limits      `json:"limits"`
	Backend   BackendSpec `json:"backend"`
	// OnInterrupt says what happens when the runner dies while the job is
	// running: "retry" (default) runs it again, "fail" finishes it as
	// failed with run.interrupted. Extension.
	OnInterrupt string `json:"on_interrupt,omitempty"`
}

// Modes of workspace.readonly_mounts (Workspace.ReadOnlyMountsMode).
const (
	MountsReadOnly    = "readonly"
	MountsCopyOnWrite = "copy_on_write"
)

// Snapshot strategies.
const (
	SnapshotCopy    = "copy"
	SnapshotOverlay = "overlay"
)

// Workspace names the host directory that is snapshotted for the job.
type Workspace struct {
	Source           string   `json:"source,omitempty"`
	Path             string   `json:"path"`
	SnapshotStrategy string   `json:"snapshot_strategy,omitempty"`
	Include          []string `json:"include,omitempty"`
	Exclude          []string `json:"exclude,omitempty"`
	// ReadOnlyMounts are directories of the workspace (relative paths,
	// "node_modules", ".venv") bound read-only at their place in the
	// sandbox instead of copied: installed dependencies. Extension.
	ReadOnlyMounts []string `json:"readonly_mounts,omitempty"`
	// ReadOnlyMountsMode says how ReadOnlyMounts appear in the sandbox:
	// MountsReadOnly ("readonly", the default when empty) binds them
	// read-only; MountsCopyOnWrite ("copy_on_write") makes each a
	// writable overlay whose lower layer is the host directory and whose
	// writes stay in the sandbox and vanish with it. Extension.
	ReadOnlyMountsMode string `json:"readonly_mounts_mode,omitempty"`
	// Caches are runner-managed directories kept across jobs by name and
	// mounted read-write at an absolute path (build caches). Extension.
	Caches []Cache `json:"caches,omitempty"`
}

// Cache is one persistent build cache of a job: <store>/caches/<Name>,
// mounted read-write at Path inside the sandbox.
type Cache struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Command is the argv to execute, a cwd relative to the snapshot root and
// explicit environment additions.
type Command struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
}

// Network modes (docs/egress.md): "disabled" (only lo, the default),
// "allowlist" (outbound only through the egress gateway, to
// policy.allowed_hosts) and "host" (the host's network, operator-enabled
// only). local_process records the intent only.
const (
	NetworkDisabled  = "disabled"
	NetworkAllowlist = "allowlist"
	NetworkHost      = "host"
)

// Policy is the execution policy of one request.
type Policy struct {
	AllowedCommands []CommandRule `json:"allowed_commands,omitempty"`
	AllowedEnv      []string      `json:"allowed_env,omitempty"`
	AllowShell      bool          `json:"allow_shell,omitempty"`
	Network         string        `json:"network,omitempty"`
	// AllowedHosts are the hosts a "allowlist" job may reach through the
	// egress gateway ("api.example.com", "*.example.com", optional
	// ":port"; default ports 443 and 80), within the operator's ceiling.
	AllowedHosts      []string `json:"allowed_hosts,omitempty"`
	WritePolicy       string   `json:"write_policy,omitempty"`
	ArtifactGlobs     []string `json:"artifact_globs,omitempty"`
	ArtifactDenyGlobs []string `json:"artifact_deny_globs,omitempty"`
	// ExecScope says which programs allowed_commands and allow_shell
	// govern: ExecScopeArgv0 ("argv0", the default when empty) checks
	// the command line only; ExecScopeEveryProcess ("every_process")
	// has the backend let the job execute nothing but the programs the
	// policy resolves from allowed_commands (and the ELF interpreters
	// they need), so a program the job starts itself is held to the
	// list too. A backend that cannot enforce it ends the job
	// backend_unavailable. Extension.
	ExecScope string `json:"exec_scope,omitempty"`
}

// Values of policy.exec_scope (Policy.ExecScope).
const (
	ExecScopeArgv0        = "argv0"
	ExecScopeEveryProcess = "every_process"
)

// CommandRule is one allowlist entry: either a bare basename (JSON string)
// or a detailed entry that pins the resolved executable path and digest.
type CommandRule struct {
	Basename string `json:"basename"`
	Path     string `json:"path,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}

// Detailed reports whether the rule pins a path or digest.
func (r CommandRule) Detailed() bool { return r.Path != "" || r.SHA256 != "" }

// MarshalJSON writes a plain basename rule back as a string, so a request
// round-trips unchanged.
func (r CommandRule) MarshalJSON() ([]byte, error) {
	if !r.Detailed() {
		return json.Marshal(r.Basename)
	}
	type plain CommandRule
	return json.Marshal(plain(r))
}

// UnmarshalJSON accepts "python" or {"basename": ..., "path": ..., "sha256": ...}.
func (r *CommandRule) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*r = CommandRule{}
		return json.Unmarshal(b, &r.Basename)
	}
	type plain CommandRule
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("allowed_commands entry: %w", err)
	}
	*r = CommandRule(p)
	return nil
}

// Limits bound a job. Zero means "use the runner default".
type Limits struct {
	TimeoutMS            int64 `json:"timeout_ms,omitempty"`
	MaxStdoutBytes       int64 `json:"max_stdout_bytes,omitempty"`
	MaxStderrBytes       int64 `json:"max_stderr_bytes,omitempty"`
	MaxArtifactBytes     int64 `json:"max_artifact_bytes,omitempty"`
	MaxArtifactFileBytes int64 `json:"max_artifact_file_bytes,omitempty"`
	MaxArtifactCount     int64 `json:"max_artifact_count,omitempty"`
	MaxRunRecordBytes    int64 `json:"max_run_record_bytes,omitempty"`
	MemoryMB             int64 `json:"memory_mb,omitempty"`
	CPUCount             int64 `json:"cpu_count,omitempty"`
	// Extensions.
	MaxProcesses int64 `json:"max_processes,omitempty"`
	TmpMB        int64 `json:"tmp_mb,omitempty"`
	// DiskMB caps the job's writable workspace (the snapshot plus what
	// the job writes; with an overlay snapshot, what the job changes)
	// and DiskInodes its files and directories. Zero DiskMB with no
	// runner default leaves the workspace unlimited, as before; zero
	// DiskInodes with a DiskMB is derived from it (validation).
	DiskMB     int64 `json:"disk_mb,omitempty"`
	DiskInodes int64 `json:"disk_inodes,omitempty"`
}

// BackendSpec selects the backend.
type BackendSpec struct {
	Kind string `json:"kind,omitempty"`
	// Image, when set, names the image (name:tag, or sha256:<hex>) the
	// job's sandbox root is made of instead of the host's view: the
	// runner resolves it in its image store, and a backend that runs no
	// images refuses it (validation.invalid_request, field
	// backend.image). Extension.
	Image string `json:"image,omitempty"`
	// Runtime is the OCI runtime of the oci backend ("runc" or "runsc";
	// empty: runc). Other kinds refuse it. Extension.
	Runtime string `json:"runtime,omitempty"`
}

// DecodeRequest parses a RunJobRequest strictly: unknown fields, trailing
// data and a non-object trace are validation.invalid_request errors.
func DecodeRequest(data []byte) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return nil, decodeError(err)
	}
	if dec.More() {
		return nil, Errorf(CodeInvalidRequest, "request has trailing data after the JSON object")
	}
	return &req, nil
}

// decodeError says what is wrong with a request in the contract's terms
// (field paths and JSON types), not in Go's (struct and type names).
func decodeError(err error) *Error {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(the document)"
		}
		return Errorf(CodeInvalidRequest, "%s: got a JSON %s, want %s", field, typ.Value, jsonType(typ.Type)).
			With("field", field)
	case errors.As(err, &syn):
		return Errorf(CodeInvalidRequest, "request is not valid JSON: %s (at byte %d)", syn.Error(), syn.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(CodeInvalidRequest, "request is not valid JSON: it ends early")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return Errorf(CodeInvalidRequest, "unknown field %s (see docs/schemas/request.schema.json for the fields a RunJobRequest has)", name).
			With("field", strings.Trim(name, `"`))
	}
	return Errorf(CodeInvalidRequest, "request is not a valid RunJobRequest: %s", msg)
}

// jsonType names a Go type as the JSON it decodes from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(jsonType(t.Elem()), "a ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type"
}
