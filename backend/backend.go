// Package backend defines the isolation boundary of agent-runner: the one
// interface every execution backend implements, the prepared Spec it runs,
// the Outcome it reports, the factories backends register from init()
// (each builds an instance from a Config), and the Set of configured
// instances a process builds from them. Nothing but a backend ever calls
// exec.
//
// A backend that keeps sandboxes also implements Sandboxes (sandbox.go):
// Create a sandbox from a Spec, then Start processes in it (Process:
// Wait, Signal, Resize, CloseStdin; the runner's side of their stdio is
// Stdio), read and write its workspace files (ReadWorkspaceFile,
// WriteWorkspaceFile: the safecopy rules), Pause and Resume it, and
// Delete it. Such a backend's Run is Create, one Start and Wait, Delete.
// Its sandboxes may also offer SandboxFiles (sandboxfiles.go: stat,
// listings, ranged reads, removal, moves, directory creation), which a
// backend whose workspace the host reaches as a directory implements
// with WorkspaceDir. They may offer PortDialer (ports.go): a connection to a
// server listening on the sandbox's own loopback.
package backend

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Backend runs one prepared Spec to completion.
type Backend interface {
	// Kind is the stable backend name used in requests ("local_process").
	Kind() string
	// Capabilities says what the backend can enforce or provide.
	Capabilities() Capabilities
	// Available reports whether the backend can run on this host now. A
	// non-nil error is surfaced as backend.unavailable with the message as
	// the reason.
	Available(ctx context.Context) error
	// Run executes spec. It returns a non-nil error only when the process
	// could not be started or the backend failed around it (spawn or setup
	// failure, coded with job codes); a process that ran and exited,
	// was killed, timed out or was canceled is reported in Outcome.
	Run(ctx context.Context, spec Spec) (Outcome, error)
}

// Capabilities describes a backend's enforcement.
type Capabilities struct {
	// Isolating is true for a backend that is a security boundary (the
	// workload cannot reach the host beyond its view); doors run only on
	// such backends unless the operator explicitly allows one that is not.
	Isolating bool
	// Enforces lists the job.Limit* names this backend enforces when asked.
	Enforces []string
	// Overlay is true when the backend can mount Workspace.Lower/Upper.
	Overlay bool
	// NetworkModes lists the policy.network values it accepts; empty means
	// it only records the intent (any mode accepted, nothing enforced).
	NetworkModes []string
	// Binds is true when the backend honours Spec.Binds (the request's
	// workspace.readonly_mounts and workspace.caches); the runner refuses
	// those fields for a backend without it.
	Binds bool
	// Placeholder is true for a kind that is registered but runs nothing
	// in this build (firecracker): doors never list it as enabled.
	Placeholder bool
	// Images is true when the backend builds a sandbox's root from
	// Spec.Image; the runner refuses an image to any other
	// (validation.invalid_request, field backend.image).
	Images bool
}

// Spec is everything a backend needs to run one job. Paths are host paths.
type Spec struct {
	JobID string
	// Argv[0] is the executable: an absolute path resolved by the pipeline.
	Argv []string
	// Env is the complete child environment ("KEY=value"); nothing is
	// inherited from the runner.
	Env []string
	// Executables, when non-nil, are the only files the workload may
	// execute, Argv[0] among them (absolute host paths the policy
	// resolved: policy.exec_scope every_process), plus the ELF
	// interpreters they name, which the backend adds; every other exec
	// inside fails with EACCES. A backend enforces it when it lists
	// job.LimitLandlock in Capabilities.Enforces; the runner refuses the
	// Spec to any other (backend.unavailable), and a backend that cannot
	// enforce it at run time refuses it too, never running without.
	Executables []string
	// Pinned, under Executables, is the file each listed path whose
	// sha256 the policy pinned was when it was hashed: a backend grants
	// such a path only if it is still that file (same identity), and
	// fails the Spec otherwise, so the digest holds for the very file
	// the workload may execute.
	Pinned map[string]FileIdentity
	// DeniedPrograms, when non-nil, are program names (basenames: the
	// policy's shells, busybox) no process of the workload may execute,
	// found in the backend's view and compared by file (device and
	// inode), whatever name or link reaches them (policy.allow_shell
	// false). A backend enforces it when it can lists job.LimitShells in
	// Outcome.Enforced; one that cannot refuses the Spec
	// (backend.unavailable) unless it was built with
	// Config.AllowUnenforcedLimits, and then lists it in NotEnforced.
	// A backend that does not know the field lists neither, and the
	// runner reports it not enforced.
	DeniedPrograms []string
	// Image, when set, is the image the sandbox's root is made of
	// instead of the backend's view of the host (see Image): its RootFS
	// is the read-only lower layer of the root, what the workload writes
	// there goes to a layer of the sandbox's own, deleted with it, and
	// the workload may run as root of its own user namespace. Argv[0]
	// and Executables are then paths inside the image (ImageView). A
	// backend without Capabilities.Images refuses the Spec.
	Image *Image
	// Workspace is the job's writable root.
	Workspace Workspace
	// Cwd is relative to the workspace root ("." for the root).
	Cwd string
	// ReadOnly lists extra host directories made visible read-only at the
	// same path (used by the agent gateway's read roots). Isolating
	// backends hide everything else outside their toolchain view.
	ReadOnly []string
	// Writable lists extra host directories made visible read-write at the
	// same path (the agent gateway's write roots, a task's inbox).
	Writable []string
	// Binds are host directories made visible at another path: a
	// caller's installed dependencies read-only inside the workspace, a
	// runner-managed build cache read-write on the sandbox's root. A
	// backend without Capabilities.Binds refuses a Spec that has any.
	Binds []Bind
	// Network is the policy network mode: "disabled" (only lo),
	// "allowlist" (only through Egress) or "host".
	Network string
	// Egress is the run's bridge to the host-side egress gateway when
	// Network is "allowlist" (see package egress): the backend makes the
	// gateway's Unix socket reachable from inside, serves the workload a
	// proxy on a loopback port that forwards to it, and sets the proxy
	// variables (ProxyEnv). The gateway decides; a backend only bridges.
	Egress *Egress
	Limits Limits
	// Stdout and Stderr receive the process output as it is produced.
	// They must be safe to call from the backend's copying goroutines.
	Stdout io.Writer
	Stderr io.Writer
	// Stdin, when non-nil, is the process's standard input; otherwise it
	// reads from /dev/null. Used by interactive task shells. An *os.File
	// is handed to the process as is; any other reader is copied through
	// a pipe, and Run returns when the process ends whether or not the
	// reader reached EOF (see Stdio).
	Stdin io.Reader
	// TTY asks for a controlling terminal (interactive shells only).
	TTY bool
	// Usage, when set, is called every UsageEvery (default 30 s) while the
	// process runs, with what the backend measures now. Backends that
	// cannot measure (no cgroup) never call it.
	Usage      func(Usage)
	UsageEvery time.Duration
	// Runtime names the OCI runtime a backend that drives one uses
	// ("runc", "runsc"; the request's backend.runtime); empty is the
	// backend's default. Other backends ignore it.
	Runtime string
}

// Egress is a run's bridge to the egress gateway.
type Egress struct {
	// Socket is the host path of the gateway's Unix socket for this run.
	Socket string
	// CABundle, when set, is a host file of PEM roots the workload must
	// trust (the system roots plus the run's interception CA).
	CABundle string
}

// ProxyPort is the loopback port inside a sandbox where an egress bridge
// serves the workload's HTTP(S) proxy.
const ProxyPort = 3128

// ProxyEnv is the environment that points a workload at its egress
// bridge: the proxy variables (both cases, as curl, git, pip, npm, Go
// and Node read one or the other) and, with a CA bundle at caPath inside
// the sandbox, the variables common TLS stacks read their roots from.
func ProxyEnv(caPath string) []string {
	proxy := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	env := []string{}
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+proxy, strings.ToLower(k)+"="+proxy)
	}
	env = append(env, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
	if caPath != "" {
		for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"} {
			env = append(env, k+"="+caPath)
		}
	}
	return env
}

// Bind is one directory bound into the sandbox.
type Bind struct {
	// Source is the host directory.
	Source string
	// Target is where it appears: relative to the workspace root
	// ("node_modules" is /workspace/node_modules, bound over the snapshot
	// or an overlay's merged view), or absolute ("/cache/go-build", a
	// mount point the backend creates on the sandbox's own root).
	Target string
	// ReadOnly binds it read-only. A writable bind is a directory the
	// runner keeps across runs (a build cache) whose files every later
	// run must be able to change, whatever uid it runs as: a backend that
	// runs workloads under varying host uids makes it writable for each
	// (linux_sandbox: an idmapped mount over one reserved on-disk owner).
	ReadOnly bool
	// CopyOnWrite, with ReadOnly, makes the bind writable inside the
	// sandbox without ever writing to Source: Source (read-only) is the
	// lower layer of an overlay whose upper layer lives on scratch space
	// of the sandbox's own, so what the workload writes there vanishes
	// with it (workspace.readonly_mounts_mode "copy_on_write"). A backend
	// that cannot do it refuses the Spec; it never binds Source plainly
	// read-only instead.
	CopyOnWrite bool
}

// Usage is a live resource sample of a running Spec.
type Usage struct {
	CPUTime         time.Duration
	MemoryBytes     int64
	PeakMemoryBytes int64
	Processes       int64
}

// Workspace is the writable root of a job. For a copy snapshot only Dir is
// set. For an overlay snapshot Lower is the read-only content-addressed
// layer and Upper/Work are the per-job overlay dirs; Dir is where the merged
// view appears inside the sandbox (the backend mounts it).
type Workspace struct {
	Dir   string
	Lower string
	Upper string
	Work  string
}

// Overlay reports whether the workspace is an overlay.
func (w Workspace) Overlay() bool { return w.Lower != "" }

// Limits are the enforced limits of a Spec; zero means unlimited.
type Limits struct {
	Timeout      time.Duration
	KillGrace    time.Duration
	MemoryBytes  int64
	CPUCount     float64
	MaxProcesses int64
	TmpBytes     int64
	// DiskBytes and DiskInodes cap the job's writable workspace: a copy
	// snapshot with everything the job writes to it, or an overlay's
	// upper layer. Zero DiskBytes leaves it unlimited (DiskInodes then
	// means nothing). A backend that enforces them may move the
	// workspace onto a filesystem of its own and report it in
	// Outcome.Layers.
	DiskBytes  int64
	DiskInodes int64
}

// Outcome is how the process ended.
type Outcome struct {
	// ExitCode is set when the process exited normally (not by a signal).
	ExitCode *int
	// Signal names the signal that killed it ("SIGKILL"), if any.
	Signal string
	// Reason is one of job.Reason*.
	Reason string
	// CPUTime and PeakMemoryBytes are zero when the backend cannot measure.
	CPUTime         time.Duration
	PeakMemoryBytes int64
	// Enforced and NotEnforced name the job.Limit* values that were or were
	// not enforced for this run.
	Enforced    []string
	NotEnforced []string
	// Layers, when set, are where the job's workspace can be read after
	// the run, top first, in place of Spec.Workspace's directories: a
	// backend that moved it onto a filesystem of its own (linux_sandbox
	// under a disk limit) names its view of that here. They stay
	// readable until Release.
	Layers []string
	// Release, when set, frees what the backend still holds for the
	// caller (that filesystem, whose memory is the job's files). Run
	// sets it only with a nil error; the caller reads Layers (artifacts)
	// and then calls it (once is enough, more is harmless).
	Release func()
	// ExecDenials are the execs the backend refused under
	// Spec.DeniedPrograms or Spec.Executables, the first
	// job.MaxExecDenials of them, and ExecDenialsTotal counts them all.
	ExecDenials      []job.ExecDenial
	ExecDenialsTotal int
}
