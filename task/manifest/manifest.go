// Package manifest parses and validates agentic-sandbox Task manifests
// (version "1", kind Task; seed 004): metadata, repository, claude, vm,
// secrets, lifecycle, parent_id and children, with the peer's defaults,
// durations such as 30m/6h/24h (zero and over 168h rejected), memory sizes
// in M/G, a generated metadata.id when none is given, and the additive
// agent.command argv that runs any agent CLI instead of Claude Code.
package manifest

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// Task is a v1 task manifest.
type Task struct {
	Version    string     `yaml:"version" json:"version"`
	Kind       string     `yaml:"kind" json:"kind"`
	Metadata   Metadata   `yaml:"metadata" json:"metadata"`
	Repository Repository `yaml:"repository" json:"repository"`
	Claude     Claude     `yaml:"claude" json:"claude"`
	Agent      *Agent     `yaml:"agent,omitempty" json:"agent,omitempty"`
	VM         VM         `yaml:"vm" json:"vm"`
	Secrets    []Secret   `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	Lifecycle  Lifecycle  `yaml:"lifecycle" json:"lifecycle"`
	ParentID   string     `yaml:"parent_id,omitempty" json:"parent_id,omitempty"`
	Children   *Children  `yaml:"children,omitempty" json:"children,omitempty"`
}

// Metadata identifies a task.
type Metadata struct {
	ID     string            `yaml:"id,omitempty" json:"id,omitempty"`
	Name   string            `yaml:"name" json:"name"`
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// Repository is what gets staged.
type Repository struct {
	URL     string `yaml:"url" json:"url"`
	Branch  string `yaml:"branch" json:"branch"`
	Commit  string `yaml:"commit,omitempty" json:"commit,omitempty"`
	Subpath string `yaml:"subpath,omitempty" json:"subpath,omitempty"`
}

// Claude configures the default agent (Claude Code).
type Claude struct {
	Prompt          string   `yaml:"prompt" json:"prompt"`
	Model           string   `yaml:"model,omitempty" json:"model,omitempty"`
	MaxTurns        int      `yaml:"max_turns,omitempty" json:"max_turns,omitempty"`
	AllowedTools    []string `yaml:"allowed_tools,omitempty" json:"allowed_tools,omitempty"`
	Headless        *bool    `yaml:"headless,omitempty" json:"headless,omitempty"`
	SkipPermissions *bool    `yaml:"skip_permissions,omitempty" json:"skip_permissions,omitempty"`
	OutputFormat    string   `yaml:"output_format,omitempty" json:"output_format,omitempty"`
}

// Agent is the additive override: any agent CLI as an argv (Claude Code
// when left out), and variables that are not secrets for its environment.
type Agent struct {
	Command []string          `yaml:"command,omitempty" json:"command,omitempty"`
	Env     map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
}

// VM sizes the task's sandbox.
type VM struct {
	Profile      string   `yaml:"profile,omitempty" json:"profile,omitempty"`
	CPUs         int      `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	Memory       string   `yaml:"memory,omitempty" json:"memory,omitempty"`
	Disk         string   `yaml:"disk,omitempty" json:"disk,omitempty"`
	NetworkMode  string   `yaml:"network_mode,omitempty" json:"network_mode,omitempty"`
	AllowedHosts []string `yaml:"allowed_hosts,omitempty" json:"allowed_hosts,omitempty"`
}

// Secret is a reference (never a value) to a secret to inject: Name is
// the variable the agent sees, and must be registered in the operator's
// secrets file; Source and Key, when given, must match that registration
// (env and the variable, or file and the path).
type Secret struct {
	Name   string `yaml:"name" json:"name"`
	Source string `yaml:"source" json:"source"`
	Key    string `yaml:"key" json:"key"`
}

// Lifecycle bounds the task.
type Lifecycle struct {
	Timeout          string   `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	FailureAction    string   `yaml:"failure_action,omitempty" json:"failure_action,omitempty"`
	ArtifactPatterns []string `yaml:"artifact_patterns,omitempty" json:"artifact_patterns,omitempty"`
}

// Children configures subtasks.
type Children struct {
	MaxConcurrent      int  `yaml:"max_concurrent,omitempty" json:"max_concurrent,omitempty"`
	WaitForChildren    bool `yaml:"wait_for_children,omitempty" json:"wait_for_children,omitempty"`
	AggregateArtifacts bool `yaml:"aggregate_artifacts,omitempty" json:"aggregate_artifacts,omitempty"`
}

// Defaults (seed 004 and its peer).
const (
	DefaultTimeout       = 24 * time.Hour
	MaxTimeout           = 168 * time.Hour
	DefaultCPUs          = 2
	DefaultMemory        = "4G"
	DefaultNetworkMode   = "isolated"
	DefaultFailureAction = "destroy"
	DefaultModel         = "claude-sonnet-4-5-20250929"
	DefaultOutputFormat  = "stream-json"
)

// Parse decodes YAML (or JSON, which is YAML) strictly, applies defaults
// and validates. A missing metadata.id is generated.
func Parse(data []byte) (*Task, error) { return parse(data, nil) }

// ParseChild is Parse for a subtask: vm.cpus, vm.memory, vm.network_mode,
// lifecycle.timeout and children.max_concurrent it leaves out are inherited
// from parent, not set to the defaults.
func ParseChild(data []byte, parent *Task) (*Task, error) {
	return parse(data, func(t *Task) {
		if t.VM.CPUs == 0 {
			t.VM.CPUs = parent.VM.CPUs
		}
		if t.VM.Memory == "" {
			t.VM.Memory = parent.VM.Memory
		}
		if t.VM.NetworkMode == "" {
			t.VM.NetworkMode = parent.VM.NetworkMode
		}
		if t.Lifecycle.Timeout == "" {
			t.Lifecycle.Timeout = parent.Lifecycle.Timeout
		}
		if t.Children != nil && t.Children.MaxConcurrent == 0 && parent.Children != nil {
			t.Children.MaxConcurrent = parent.Children.MaxConcurrent
		}
	})
}

func parse(data []byte, inherit func(*Task)) (*Task, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var t Task
	if err := dec.Decode(&t); err != nil {
		return nil, job.Errorf(job.CodeInvalidRequest, "task manifest is not a valid v1 Task: %s", decodeMessage(err))
	}
	if inherit != nil {
		inherit(&t)
	}
	t.defaults()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Load reads and parses a manifest file.
func Load(path string) (*Task, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read task manifest")
	}
	return Parse(b)
}

func (t *Task) defaults() {
	if t.Metadata.ID == "" {
		t.Metadata.ID = "task-" + uuid.NewString()
	}
	if t.Claude.Model == "" {
		t.Claude.Model = DefaultModel
	}
	if t.Claude.OutputFormat == "" {
		t.Claude.OutputFormat = DefaultOutputFormat
	}
	if t.VM.CPUs == 0 {
		t.VM.CPUs = DefaultCPUs
	}
	if t.VM.Memory == "" {
		t.VM.Memory = DefaultMemory
	}
	if t.VM.NetworkMode == "" {
		t.VM.NetworkMode = DefaultNetworkMode
	}
	if t.Lifecycle.Timeout == "" {
		t.Lifecycle.Timeout = DefaultTimeout.String()
	}
	if t.Lifecycle.FailureAction == "" {
		t.Lifecycle.FailureAction = DefaultFailureAction
	}
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func invalid(field, format string, args ...any) *job.Error {
	return job.Errorf(job.CodeInvalidRequest, "%s: %s", field, fmt.Sprintf(format, args...)).With("field", field)
}

// Validate checks a defaulted manifest.
func (t *Task) Validate() error {
	switch {
	case t.Version != "1":
		return invalid("version", "must be \"1\"")
	case t.Kind != "Task":
		return invalid("kind", "must be \"Task\"")
	case !idPattern.MatchString(t.Metadata.ID):
		return invalid("metadata.id", "must match %s", idPattern)
	case strings.TrimSpace(t.Metadata.Name) == "":
		return invalid("metadata.name", "is required")
	case t.Repository.URL == "":
		return invalid("repository.url", "is required")
	case t.Repository.Branch == "":
		return invalid("repository.branch", "is required")
	case strings.TrimSpace(t.Claude.Prompt) == "" && (t.Agent == nil || t.Agent.Command == nil):
		// Claude Code runs on the prompt; an agent.command may not need one.
		return invalid("claude.prompt", "is required (unless agent.command names another agent)")
	case t.VM.CPUs < 0 || t.VM.CPUs > 64:
		return invalid("vm.cpus", "must be between 1 and 64")
	}
	if a := t.Agent; a != nil {
		if a.Command != nil && (len(a.Command) == 0 || a.Command[0] == "") || a.Command == nil && len(a.Env) == 0 {
			return invalid("agent.command", "must be a non-empty argv")
		}
		for _, arg := range a.Command {
			if strings.ContainsRune(arg, 0) {
				return invalid("agent.command", "arguments must not contain NUL bytes")
			}
		}
		if err := validateEnv(a.Env, t.Secrets); err != nil {
			return err
		}
	}
	if _, err := ParseDuration(t.Lifecycle.Timeout); err != nil {
		return invalid("lifecycle.timeout", "%v", err)
	}
	if _, err := ParseSize(t.VM.Memory); err != nil {
		return invalid("vm.memory", "%v", err)
	}
	if t.VM.Disk != "" {
		if _, err := ParseSize(t.VM.Disk); err != nil {
			return invalid("vm.disk", "%v", err)
		}
	}
	switch t.VM.NetworkMode {
	case "isolated", "outbound", "full", "gateway", "host":
	default:
		return invalid("vm.network_mode", "must be isolated, outbound, full, gateway or host")
	}
	switch net := t.Network(); {
	case net == job.NetworkAllowlist && len(t.VM.AllowedHosts) == 0:
		return invalid("vm.allowed_hosts", "vm.network_mode %s reaches only listed hosts: list at least one", t.VM.NetworkMode)
	case net != job.NetworkAllowlist && len(t.VM.AllowedHosts) > 0:
		return invalid("vm.allowed_hosts", "only applies with vm.network_mode outbound")
	}
	if _, err := t.AllowedHosts(); err != nil {
		return invalid("vm.allowed_hosts", "%v", err)
	}
	switch t.Lifecycle.FailureAction {
	case "destroy", "preserve":
	default:
		return invalid("lifecycle.failure_action", "must be destroy or preserve")
	}
	if t.Repository.Subpath != "" && (strings.HasPrefix(t.Repository.Subpath, "/") || strings.Contains("/"+t.Repository.Subpath+"/", "/../")) {
		return job.Errorf(job.CodePathEscape, "repository.subpath must stay inside the repository").With("field", "repository.subpath")
	}
	for i, s := range t.Secrets {
		field := fmt.Sprintf("secrets[%d]", i)
		switch {
		case s.Name == "" || strings.ContainsAny(s.Name, "=\x00"):
			return invalid(field+".name", "must be an environment variable name")
		case s.Source == "" && s.Key == "":
			// Only a name: the operator's secrets file says where it lives.
		case s.Key == "":
			return invalid(field+".key", "is required")
		case s.Source != "env" && s.Source != "file" && s.Source != "vault":
			return invalid(field+".source", "must be env, file or vault")
		}
	}
	for i, p := range t.Lifecycle.ArtifactPatterns {
		if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.Contains("/"+p+"/", "/../") {
			return job.Errorf(job.CodePathEscape, "lifecycle.artifact_patterns[%d] %q must be a relative pattern inside the workspace", i, p).With("field", "lifecycle.artifact_patterns")
		}
		if _, err := path.Match(p, ""); err != nil {
			return invalid(fmt.Sprintf("lifecycle.artifact_patterns[%d]", i), "bad pattern %q", p)
		}
	}
	if c := t.Children; c != nil && (c.MaxConcurrent < 0 || c.MaxConcurrent > 100) {
		return invalid("children.max_concurrent", "must be between 0 and 100")
	}
	return nil
}

// Timeout is the parsed lifecycle timeout.
func (t *Task) Timeout() time.Duration {
	d, _ := ParseDuration(t.Lifecycle.Timeout)
	return d
}

// MemoryBytes is the parsed vm.memory.
func (t *Task) MemoryBytes() int64 {
	n, _ := ParseSize(t.VM.Memory)
	return n
}

// DiskBytes is the parsed vm.disk; 0 when unset.
func (t *Task) DiskBytes() int64 {
	if t.VM.Disk == "" {
		return 0
	}
	n, _ := ParseSize(t.VM.Disk)
	return n
}

// ParseDuration accepts Go durations and whole days ("30m", "6h", "1h30m",
// "2d"); zero, negative and over 168h are errors.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("bad duration %q (use forms like 30m, 6h, 24h)", s)
		}
	}
	switch {
	case d <= 0:
		return 0, fmt.Errorf("duration %q must be positive", s)
	case d > MaxTimeout:
		return 0, fmt.Errorf("duration %q exceeds the 168h ceiling", s)
	}
	return d, nil
}

// ParseSize accepts sizes with K, M, G or T suffixes (binary units, an
// optional trailing "i" or "B": 512M, 8G, 16Gi, 40GB).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "K"):
		mult = 1 << 10
	case strings.HasSuffix(t, "M"):
		mult = 1 << 20
	case strings.HasSuffix(t, "G"):
		mult = 1 << 30
	case strings.HasSuffix(t, "T"):
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("size %q needs a unit (M or G)", s)
	}
	n, err := strconv.ParseInt(t[:len(t)-1], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// Network is the task's network mode in the vocabulary every door
// shares (docs/egress.md): isolated is "disabled"; outbound (and seed
// 004's gateway) is "allowlist" of vm.allowed_hosts through the egress
// gateway; full (and host) is "host", which the operator must enable.
func (t *Task) Network() string {
	switch t.VM.NetworkMode {
	case "outbound", "gateway":
		return job.NetworkAllowlist
	case "full", "host":
		return job.NetworkHost
	}
	return job.NetworkDisabled
}

// AllowedHosts parses vm.allowed_hosts as egress rules.
func (t *Task) AllowedHosts() ([]egress.Rule, error) {
	return egress.ParseRules(t.VM.AllowedHosts)
}

// HasID says whether a manifest document names its own metadata.id (a
// document without one gets an id minted by Parse, different each time).
func HasID(data []byte) bool {
	var doc struct {
		Metadata struct {
			ID string `yaml:"id"`
		} `yaml:"metadata"`
	}
	return yaml.Unmarshal(data, &doc) == nil && doc.Metadata.ID != ""
}

// sections names each manifest struct by where it sits in the document.
var sections = map[string]string{
	"Task": "the manifest's top level", "Metadata": "metadata", "Repository": "repository",
	"Claude": "claude", "Agent": "agent", "VM": "vm", "Secret": "a secrets entry",
	"Lifecycle": "lifecycle", "Children": "children",
}

var goTypeField = regexp.MustCompile(`field (\S+) not found in type manifest\.(\w+)`)

// decodeMessage says what the YAML decoder found wrong in the manifest's
// terms (sections and fields), not Go's (struct and type names).
func decodeMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
	msg = goTypeField.ReplaceAllStringFunc(msg, func(m string) string {
		sub := goTypeField.FindStringSubmatch(m)
		where := sections[sub[2]]
		if where == "" {
			where = sub[2]
		}
		return "unknown field " + sub[1] + " in " + where
	})
	msg = strings.ReplaceAll(msg, " into manifest.", " into ")
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return l == "" }), "; ")
}
