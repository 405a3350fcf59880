package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// Tool names the gateway knows.
const (
	ToolListLogs  = "list_logs"
	ToolReadLog   = "read_log"
	ToolTailLog   = "tail_log"
	ToolGrepLog   = "grep_log"
	ToolRunTests  = "run_tests"
	ToolGitStatus = "git_status"
)

// KnownTools lists every tool a manifest may grant.
var KnownTools = []string{ToolListLogs, ToolReadLog, ToolTailLog, ToolGrepLog, ToolRunTests, ToolGitStatus}

// Defaults for absent limits (the seed's zero-when-absent is a bug).
const (
	DefaultMaxRuntimeSeconds = 300
	DefaultMaxMemoryMB       = 512
	DefaultMaxToolCalls      = 50
)

// Upper bounds a manifest may ask for.
const (
	MaxRuntimeSeconds = 24 * 3600
	MaxMemoryMB       = 1 << 20
	MaxToolCalls      = 10000
)

// Policy is the compiled manifest. Every gateway decision reads it; the
// manifest's role text is not part of it.
type Policy struct {
	Name       string          `json:"name"`
	Tools      []string        `json:"tools"`
	ReadRoots  []string        `json:"read_roots"`
	WriteRoots []string        `json:"write_roots"`
	Commands   []PinnedCommand `json:"commands"`
	Network    bool            `json:"network"`
	// NetworkHosts are egress rules: jobs reach only these hosts, through
	// the gateway (capabilities.network_hosts).
	NetworkHosts []string       `json:"network_hosts,omitempty"`
	Git          bool           `json:"git"`
	Limits       CompiledLimits `json:"limits"`
	Output       Output         `json:"output"`
	// Warnings are grants that compile but cannot be used as written.
	Warnings []string `json:"warnings,omitempty"`
}

// PinnedCommand is one allowlisted executable. SHA256 is the digest taken
// at compile time ("" when the file did not exist then); the job pipeline
// refuses to run a binary whose digest changed.
type PinnedCommand struct {
	Path     string `json:"path"`
	Basename string `json:"basename"`
	SHA256   string `json:"sha256,omitempty"`
}

// CompiledLimits are the effective limits; Defaulted names the ones the
// manifest left out.
type CompiledLimits struct {
	MaxRuntimeSeconds int64    `json:"max_runtime_seconds"`
	MaxMemoryMB       int64    `json:"max_memory_mb"`
	MaxToolCalls      int64    `json:"max_tool_calls"`
	Defaulted         []string `json:"defaulted,omitempty"`
}

// MaxRuntime is the run deadline as a duration.
func (l CompiledLimits) MaxRuntime() time.Duration {
	return time.Duration(l.MaxRuntimeSeconds) * time.Second
}

// Allows reports whether the policy grants tool.
func (p *Policy) Allows(tool string) bool { return slices.Contains(p.Tools, tool) }

// Command returns the pinned command whose path is exactly path.
func (p *Policy) Command(path string) (PinnedCommand, bool) {
	for _, c := range p.Commands {
		if c.Path == path {
			return c, true
		}
	}
	return PinnedCommand{}, false
}

// Compile turns m into a Policy. Relative filesystem roots are joined to
// baseDir (normally the process working directory). It returns a
// validation.invalid_request error for unknown tools, bad paths and bad
// limits.
func Compile(m *Manifest, baseDir string) (*Policy, error) {
	if strings.TrimSpace(m.Name) == "" {
		return nil, invalid("name", "must not be empty")
	}
	base, err := filepath.Abs(baseDir)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "base directory")
	}
	p := &Policy{Name: m.Name, Network: m.Capabilities.Network, Git: m.Capabilities.Git, Output: m.Output,
		Tools: []string{}, ReadRoots: []string{}, WriteRoots: []string{}, Commands: []PinnedCommand{}}
	if hosts := m.Capabilities.NetworkHosts; len(hosts) > 0 {
		rules, err := egress.ParseRules(hosts)
		if err != nil {
			return nil, invalid("capabilities.network_hosts", "%v", err)
		}
		for _, r := range rules {
			p.NetworkHosts = append(p.NetworkHosts, r.String())
		}
		p.Network = true
	}
	for i, t := range m.Capabilities.Tools {
		if !slices.Contains(KnownTools, t) {
			return nil, invalid("capabilities.tools", "unknown tool %q (known: %s)", t, strings.Join(KnownTools, ", ")).With("index", i)
		}
		if !slices.Contains(p.Tools, t) {
			p.Tools = append(p.Tools, t)
		}
	}
	slices.Sort(p.Tools)
	if p.ReadRoots, err = roots("capabilities.filesystem.read", m.Capabilities.Filesystem.Read, base); err != nil {
		return nil, err
	}
	if p.WriteRoots, err = roots("capabilities.filesystem.write", m.Capabilities.Filesystem.Write, base); err != nil {
		return nil, err
	}
	for i, c := range m.Capabilities.Commands.Allow {
		if err := checkPathText("capabilities.commands.allow", c); err != nil {
			return nil, err.With("index", i)
		}
		if !filepath.IsAbs(c) {
			return nil, invalid("capabilities.commands.allow", "%q must be an absolute path", c).With("index", i)
		}
		clean := filepath.Clean(c)
		pc := PinnedCommand{Path: clean, Basename: filepath.Base(clean)}
		if sum, err := fileSHA256(clean); err == nil {
			pc.SHA256 = sum
		} else {
			p.Warnings = append(p.Warnings, "command "+clean+" cannot be pinned now: "+err.Error())
		}
		if _, dup := p.Command(clean); !dup {
			p.Commands = append(p.Commands, pc)
		}
	}
	if p.Limits, err = compileLimits(m.Limits); err != nil {
		return nil, err
	}
	if p.Allows(ToolGitStatus) && !p.Git {
		p.Warnings = append(p.Warnings, "git_status is listed but capabilities.git is false: every call is denied")
	}
	if (p.Allows(ToolRunTests) || p.Allows(ToolGitStatus)) && len(p.Commands) == 0 {
		p.Warnings = append(p.Warnings, "subprocess tools are listed but commands.allow is empty: every call is denied")
	}
	switch m.Output.Format {
	case "", "json", "text", "markdown":
	default:
		return nil, invalid("output.format", "unknown format %q (json, text, markdown)", m.Output.Format)
	}
	return p, nil
}

func roots(field string, in []string, base string) ([]string, error) {
	out := []string{}
	for i, r := range in {
		if err := checkPathText(field, r); err != nil {
			return nil, err.With("index", i)
		}
		abs := r
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(base, r)
		}
		abs = filepath.Clean(abs)
		if abs == "/" {
			return nil, invalid(field, "the filesystem root cannot be granted").With("index", i)
		}
		if !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	return out, nil
}

func checkPathText(field, p string) *job.Error {
	if strings.TrimSpace(p) == "" {
		return invalid(field, "empty path")
	}
	if strings.ContainsRune(p, 0) || len(p) > 4096 {
		return job.Errorf(job.CodePathEscape, "%s: path contains NUL or is too long", field).With("field", field)
	}
	return nil
}

func compileLimits(l Limits) (CompiledLimits, error) {
	out := CompiledLimits{}
	type lim struct {
		name     string
		in       *int64
		def, max int64
		dst      *int64
	}
	for _, x := range []lim{
		{"max_runtime_seconds", l.MaxRuntimeSeconds, DefaultMaxRuntimeSeconds, MaxRuntimeSeconds, &out.MaxRuntimeSeconds},
		{"max_memory_mb", l.MaxMemoryMB, DefaultMaxMemoryMB, MaxMemoryMB, &out.MaxMemoryMB},
		{"max_tool_calls", l.MaxToolCalls, DefaultMaxToolCalls, MaxToolCalls, &out.MaxToolCalls},
	} {
		switch {
		case x.in == nil:
			*x.dst = x.def
			out.Defaulted = append(out.Defaulted, x.name)
		case *x.in <= 0:
			return out, job.Errorf(job.CodeLimitExceeded, "limits.%s: must be positive (omit it for the default %d)", x.name, x.def).With("field", "limits."+x.name)
		case *x.in > x.max:
			return out, job.Errorf(job.CodeLimitExceeded, "limits.%s: %d is above the maximum %d", x.name, *x.in, x.max).With("field", "limits."+x.name)
		default:
			*x.dst = *x.in
		}
	}
	return out, nil
}

// fileSHA256 returns the hex sha256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LoadPolicy loads and compiles the manifest at path against baseDir.
func LoadPolicy(path, baseDir string) (*Manifest, *Policy, []byte, error) {
	m, raw, err := Load(path)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := Compile(m, baseDir)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, p, raw, nil
}
