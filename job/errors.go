package job

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a stable, dotted error code. Callers match on codes, never on
// messages. Each boundary (HTTP, CLI, MCP) translates codes in one place.
type Code string

// Seed error codes (seed 002) followed by the codes agent-runner adds; every
// addition is listed in docs/api.md.
const (
	CodeInvalidRequest     Code = "validation.invalid_request"
	CodePathEscape         Code = "validation.path_escape"
	CodeJobNotFound        Code = "job.not_found"
	CodeQueueFull          Code = "queue.full"
	CodeQueueClosed        Code = "queue.closed"
	CodeCommandDenied      Code = "policy.command_denied"
	CodeShellDenied        Code = "policy.shell_denied"
	CodeEnvDenied          Code = "policy.env_denied"
	CodeArtifactDenied     Code = "policy.artifact_denied"
	CodeBackendUnavail     Code = "backend.unavailable"
	CodeBackendSetupFailed Code = "backend.setup_failed"
	CodeRunTimedOut        Code = "run.timed_out"
	CodeRunSpawnFailed     Code = "run.spawn_failed"
	CodeRunIOFailed        Code = "run.io_failed"
	CodeArtifactFailed     Code = "run.artifact_collection_failed"
	CodeRunExitNonzero     Code = "run.exit_nonzero"

	// Additions (documented in docs/api.md).
	CodeNetworkDenied  Code = "policy.network_denied"
	CodeLimitExceeded  Code = "validation.limit_exceeded"
	CodeRunCanceled    Code = "run.canceled"
	CodeRunOOM         Code = "run.oom_killed"
	CodeRunSignaled    Code = "run.signaled"
	CodeRunInterrupted Code = "run.interrupted"
	CodeRecordTooLarge Code = "run.record_too_large"
	CodeSnapshotFailed Code = "run.snapshot_failed"
	CodeJobConflict    Code = "job.conflict"
	CodeNotTerminal    Code = "job.not_terminal"
	CodeUnauthorized   Code = "auth.unauthorized"
	CodeForbidden      Code = "auth.forbidden"
	CodeBodyTooLarge   Code = "validation.body_too_large"
	// CodeUnsupportedMediaType: a state-changing HTTP request's body is
	// not JSON or YAML (415).
	CodeUnsupportedMediaType Code = "validation.unsupported_media_type"
	CodeInternal             Code = "internal.error"
	// CodeToolDenied: an agent asked for a tool its manifest does not grant.
	CodeToolDenied Code = "policy.tool_denied"
	// CodeSessionNotRunning: a sandbox call needs a running sandbox (an
	// exec, a file write, a pause) and the sandbox is paused or has
	// ended (stopped, failed, expired); details.state says which (409).
	CodeSessionNotRunning Code = "session.not_running"
	// CodeSessionLimit: the operator's cap on live sandboxes
	// (--max-sandboxes), or the cap on a sandbox's running background
	// processes, is reached (429).
	CodeSessionLimit Code = "session.limit_reached"
	// CodeSessionNoTerminal: a resize of a sandbox process that runs
	// without a pseudo-terminal (409).
	CodeSessionNoTerminal Code = "session.no_terminal"
	// CodeDirectoryNotEmpty: a sandbox file removal of a directory with
	// entries without recursive, or a move onto one (409).
	CodeDirectoryNotEmpty Code = "session.directory_not_empty"
	// CodeRangeNotSatisfiable: a ranged file read whose range selects
	// no byte of the file (416; details.size is the file's).
	CodeRangeNotSatisfiable Code = "validation.range_not_satisfiable"
	// CodeSessionPortUnreachable: nothing accepts connections on the
	// sandbox's loopback port a proxied request names (refused, or no
	// answer in time) (502).
	CodeSessionPortUnreachable Code = "session.port_unreachable"
	// CodeSessionWorkerLost: the worker that holds a sandbox is gone
	// (its heartbeats stopped, its NATS connection closed, or it does
	// not answer); the sandbox is recorded failed with it (410).
	CodeSessionWorkerLost Code = "session.worker_lost"
	// CodeImageNotFound: no image in the image store has the name:tag
	// or digest a request names (404).
	CodeImageNotFound Code = "image.not_found"
	// CodeImageInvalid: an import is not an OCI image layout (directory
	// or tar archive) or a docker save archive, or a blob in it does not
	// match its digest, or its manifest or config is malformed (422).
	CodeImageInvalid Code = "image.invalid"
	// CodeImageUnsafeEntry: a layer holds an entry the store refuses: a
	// name with ".." or an absolute name, a hard link whose target is
	// absolute, climbs out or is missing, a device node; details.entry
	// names it (422).
	CodeImageUnsafeEntry Code = "image.unsafe_entry"
	// CodeImageTooLarge: an image's declared unpacked size or entry
	// count, or an archive, is over the store's caps (413).
	CodeImageTooLarge Code = "image.too_large"
)

// Class is the part of the code before the first dot ("policy", "run", ...).
func (c Code) Class() string {
	class, _, _ := strings.Cut(string(c), ".")
	return class
}

// Error is the stable error object carried in results and API responses.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// cause is the wrapped Go error, never serialized.
	cause error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// With returns e with one detail added.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds an *Error that wraps cause; the cause's text goes into
// details["cause"] so it survives serialization.
func Wrap(code Code, cause error, message string) *Error {
	e := &Error{Code: code, Message: message, cause: cause}
	if cause != nil {
		e.With("cause", cause.Error())
	}
	return e
}

// AsError extracts the *Error in err's chain; anything else becomes
// internal.error.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Wrap(CodeInternal, err, "internal error")
}

// CodeOf returns the stable code of err, or "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	return AsError(err).Code
}
