// Package hostcheck probes what this host lets agent-runner enforce: user
// namespaces, Landlock, seccomp, cgroups, overlayfs and devices, the run
// store's directory, and each registered backend's own probe. Every check
// says what it found and, where the host falls short, the exact step that
// fixes it. `agent-runner doctor` prints its Report.
//
// The probes read /proc, /sys and /dev under Host.Root, so tests run them
// against fake trees; the few that cannot be read from files (the Landlock
// syscall, PATH look-ups, a mount in a user namespace) are function fields
// of Host.
package hostcheck

import (
	"context"
	"runtime"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
)

// SchemaVersion is the version of the Report JSON schema
// (docs/operations.md, "agent-runner doctor"). Fields are only added
// within one version.
const SchemaVersion = 1

// Status is a check's verdict.
type Status string

// The statuses. Fail means the default backend cannot run jobs, or cannot
// enforce a limit the runner requires, until it is fixed.
const (
	StatusOK   Status = "ok"
	StatusWarn Status = "warn"
	StatusFail Status = "fail"
	StatusInfo Status = "info"
)

// The sections checks are grouped in, in report order.
const (
	SectionUserns  = "user namespaces"
	SectionWalls   = "kernel walls"
	SectionCgroups = "cgroups"
	SectionFS      = "filesystems and devices"
	SectionTools   = "other runtimes"
	SectionStore   = "store"
	SectionSandbox = "sandbox"
)

// Sections lists the check sections in report order.
var Sections = []string{SectionUserns, SectionWalls, SectionCgroups, SectionFS, SectionTools, SectionStore, SectionSandbox}

// Check is one probe's answer.
type Check struct {
	Section string `json:"section"`
	// Name is stable (snake_case) and unique in a report.
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Found says what the probe saw, in words.
	Found string `json:"found"`
	// Fix is the step that makes the check pass; empty when ok.
	Fix string `json:"fix,omitempty"`
}

// Report is everything doctor found.
type Report struct {
	SchemaVersion int `json:"schema_version"`
	// OK is true when no check and no default-backend row failed.
	OK             bool            `json:"ok"`
	DefaultBackend string          `json:"default_backend"`
	Host           HostInfo        `json:"host"`
	Checks         []Check         `json:"checks"`
	Backends       []BackendReport `json:"backends"`
}

// HostInfo identifies the machine and the runner's identity on it.
type HostInfo struct {
	Kernel   string `json:"kernel"`
	Arch     string `json:"arch"`
	UID      int    `json:"uid"`
	StoreDir string `json:"store_dir"`
}

// Failed lists the names of the checks and backends that failed.
func (r Report) Failed() []string {
	var names []string
	for _, c := range r.Checks {
		if c.Status == StatusFail {
			names = append(names, c.Name)
		}
	}
	for _, b := range r.Backends {
		if b.Status == StatusFail {
			names = append(names, "backend "+b.Kind)
		}
	}
	return names
}

// Host is where the probes look and how they reach what files cannot show.
type Host struct {
	// Root prefixes /proc, /sys and /dev; "" is this machine.
	Root string
	// UID is the runner's uid.
	UID int
	// Arch is the GOARCH of the runner.
	Arch string
	// LandlockABI returns the kernel's Landlock ABI version.
	LandlockABI func() (int, error)
	// LookPath finds an executable on PATH.
	LookPath func(name string) (string, error)
	// Version returns the first line of `path --version`.
	Version func(ctx context.Context, path string) (string, error)
	// OverlayInUserns mounts an overlay (userxattr) inside a new user and
	// mount namespace, working under dir.
	OverlayInUserns func(ctx context.Context, dir string) error
}

// Options says what the report is about.
type Options struct {
	// StoreDir is the run store the runner will use.
	StoreDir string
	// Backends are probed in order; DefaultBackend names the one whose
	// requirements decide Report.OK.
	Backends       []backend.Backend
	DefaultBackend string
	// ProbeTimeout bounds each backend's Available call (default 30 s).
	ProbeTimeout time.Duration
}

// Run probes h and returns the report. It never fails: a probe that cannot
// look says so in its check.
func Run(ctx context.Context, h Host, opt Options) Report {
	if opt.ProbeTimeout <= 0 {
		opt.ProbeTimeout = 30 * time.Second
	}
	if h.Arch == "" {
		h.Arch = runtime.GOARCH
	}
	r := Report{
		SchemaVersion:  SchemaVersion,
		DefaultBackend: opt.DefaultBackend,
		Host:           HostInfo{Kernel: strings.TrimSpace(h.read("/proc/sys/kernel/osrelease")), Arch: h.Arch, UID: h.UID, StoreDir: absPath(opt.StoreDir)},
	}
	r.Checks = append(r.Checks, h.userns()...)
	abi := h.landlockABI()
	r.Checks = append(r.Checks, h.walls(abi)...)
	cg := h.cgroups()
	r.Checks = append(r.Checks, cg.checks(h.UID)...)
	r.Checks = append(r.Checks, h.filesystems(ctx, overlayDir(opt.StoreDir))...)
	r.Checks = append(r.Checks, h.tools(ctx)...)
	r.Checks = append(r.Checks, storeChecks(opt.StoreDir)...)
	facts := hostFacts{uid: h.UID, landlock: abi, cgroups: cg}
	var probe Check
	r.Backends, probe = probeBackends(ctx, opt, facts, r.Checks)
	r.Checks = append(r.Checks, probe)
	r.OK = len(r.Failed()) == 0
	return r
}
