package linuxsandbox

import (
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// initConfig is what the runner sends the sandbox init over its config
// pipe (fd 3) after placing it in its cgroups.
type initConfig struct {
	// Root is an empty host directory the init mounts its tmpfs root on.
	Root string `json:"root"`
	// Workspace is the host snapshot, mounted read-write at /workspace.
	Workspace string `json:"workspace"`
	// Lower, Upper and Work, when set, make /workspace an overlay of the
	// shared read-only lower layer and this job's upper layer instead.
	Lower string `json:"lower,omitempty"`
	Upper string `json:"upper,omitempty"`
	Work  string `json:"work,omitempty"`
	// LayerFD says the lower layer arrives as an idmapped mount on the
	// layer socket (fd 5) instead of by path (see layer.go).
	LayerFD bool `json:"layer_fd,omitempty"`
	// BindFDs says every bind source (see hostMounts) arrives as a
	// detached mount on the layer socket, before the layer, instead of by
	// path (a root runner's; see hostmounts.go).
	BindFDs   bool     `json:"bind_fds,omitempty"`
	Toolchain []string `json:"toolchain"` // host dirs bound read-only at the same path
	Masked    []string `json:"masked"`    // files hidden behind an empty file
	// ReadOnly and Writable are extra host directories bound at the same
	// path: the operator's view (backend.Config.ReadOnly) and the job's.
	ReadOnly []string `json:"read_only"`
	Writable []string `json:"writable"`
	// Binds are the Spec's binds (binds.go), mounted after /tmp.
	Binds    []bindMount `json:"binds,omitempty"`
	TmpBytes int64       `json:"tmp_bytes"`
	// TTY says the init's stdin is a terminal (a one-shot run's with
	// Spec.TTY) to bind at /dev/console and open to the workload.
	TTY bool `json:"tty,omitempty"`
	// HostNetwork leaves the sandbox in the host's network namespace
	// (network mode "host", an operator's choice).
	HostNetwork bool `json:"host_network,omitempty"`
	// EgressSocket and EgressCA are the host paths of the egress
	// gateway's socket and the run's CA bundle (see egress.go).
	EgressSocket string `json:"egress_socket,omitempty"`
	EgressCA     string `json:"egress_ca,omitempty"`
	// Executables, when non-nil, are the only files the workload may
	// execute, with the ELF interpreters they name (execallow.go); no
	// omitempty: an empty list still confines.
	Executables []string `json:"executables"`
	// Pinned are the identities of the Executables whose digest the
	// policy checked: granted only if still those files (execallow.go).
	Pinned map[string]backend.FileIdentity `json:"pinned,omitempty"`
	// DeniedPrograms, when set, are program names the workload may
	// neither execute nor read, found in the view (execdeny.go); set
	// only where Landlock can hold them.
	DeniedPrograms []string `json:"denied_programs,omitempty"`
	// SearchPath is the workload's PATH, where denied programs are
	// looked for besides the program directories.
	SearchPath []string `json:"search_path,omitempty"`
	// Image says the root is an image's (image.go): an overlay of the
	// image, received idmapped on the layer socket after the host
	// mounts, and of the upper and work dirs in ImageDir, a host
	// directory sent among the host mounts. The toolchain, the masks and
	// the operator's read-only directories are then not bound, and the
	// root stays writable.
	Image    bool   `json:"image,omitempty"`
	ImageDir string `json:"image_dir,omitempty"`
	// UID and GID run the workload inside the namespace.
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// initResult is what the init reports on its control socket (fd 4) when
// it could not build the sandbox (as a ctlReply without an Op).
type initResult struct {
	Error string `json:"error,omitempty"`
	// Stage names the setup step that failed, if Error is set.
	Stage string `json:"stage,omitempty"`
	// ExecDenials are the refused execs the init saw (execnotify.go).
	ExecDenials      []job.ExecDenial `json:"exec_denials,omitempty"`
	ExecDenialsTotal int              `json:"exec_denials_total,omitempty"`
}

// WorkspaceMount is where the job's snapshot appears inside the sandbox.
const WorkspaceMount = "/workspace"

// DefaultToolchain is the host view bound read-only into every sandbox.
var DefaultToolchain = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// DefaultMasked are host secrets hidden even inside the read-only /etc.
var DefaultMasked = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
	"/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_dsa_key",
	"/etc/ssl/private", "/etc/sudoers", "/etc/sudoers.d", "/etc/machine-id",
}
