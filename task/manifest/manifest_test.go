package manifest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// fixtures holds a copy of the peer's manifests (seed 004's fixtures).
const fixtures = "testdata"

func TestEveryFixtureLoads(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "*.yaml"))
	if len(files) != 6 {
		t.Fatalf("found %d fixtures in %s, want the peer's 6", len(files), fixtures)
	}
	for _, f := range files {
		task, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		if task.Metadata.ID == "" || task.Timeout() <= 0 || task.MemoryBytes() <= 0 {
			t.Errorf("%s: defaults missing: %+v", filepath.Base(f), task)
		}
	}
}

func TestFixtureDetails(t *testing.T) {
	noID, err := Load(filepath.Join(fixtures, "quickref-minimal-no-id.yaml"))
	if err != nil || !strings.HasPrefix(noID.Metadata.ID, "task-") {
		t.Errorf("generated id = %q, %v", noID.Metadata.ID, err)
	}
	full, err := Load(filepath.Join(fixtures, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if full.Timeout() != 6*time.Hour || full.MemoryBytes() != 16<<30 || full.VM.CPUs != 8 || full.Lifecycle.FailureAction != "preserve" ||
		full.VM.NetworkMode != "outbound" || len(full.Secrets) != 1 || full.Repository.Commit != "abc123" {
		t.Errorf("full.yaml parsed as %+v", full)
	}
	child, _ := Load(filepath.Join(fixtures, "with-parent.yaml"))
	if child.ParentID != "parent-task-123" {
		t.Errorf("parent_id = %q", child.ParentID)
	}
	parent, _ := Load(filepath.Join(fixtures, "with-children.yaml"))
	if parent.Children == nil || parent.Children.MaxConcurrent != 5 || !parent.Children.WaitForChildren || !parent.Children.AggregateArtifacts {
		t.Errorf("children = %+v", parent.Children)
	}
	min, _ := Load(filepath.Join(fixtures, "minimal.yaml"))
	if min.Timeout() != DefaultTimeout || min.VM.NetworkMode != "isolated" || min.Lifecycle.FailureAction != "destroy" || min.Claude.OutputFormat != "stream-json" {
		t.Errorf("minimal defaults = %+v", min)
	}
}

const base = `version: "1"
kind: Task
metadata: {id: t1, name: T}
repository: {url: "file:///srv/repo", branch: main}
claude: {prompt: "do it"}
`

func TestValidation(t *testing.T) {
	tests := []struct {
		name, extra string
		edit        func(string) string
		code        job.Code
	}{
		{"valid", "", nil, ""},
		{"agent command", "agent: {command: [my-agent, --go]}\n", nil, ""},
		{"empty agent command", "agent: {command: []}\n", nil, job.CodeInvalidRequest},
		{"unknown field", "surprise: 1\n", nil, job.CodeInvalidRequest},
		{"bad version", "", func(s string) string { return strings.Replace(s, `"1"`, `"2"`, 1) }, job.CodeInvalidRequest},
		{"bad kind", "", func(s string) string { return strings.Replace(s, "kind: Task", "kind: Job", 1) }, job.CodeInvalidRequest},
		{"no name", "", func(s string) string { return strings.Replace(s, "name: T", "name: \"\"", 1) }, job.CodeInvalidRequest},
		{"no url", "", func(s string) string { return strings.Replace(s, `url: "file:///srv/repo", `, "", 1) }, job.CodeInvalidRequest},
		{"no branch", "", func(s string) string { return strings.Replace(s, ", branch: main", "", 1) }, job.CodeInvalidRequest},
		{"no prompt", "", func(s string) string { return strings.Replace(s, `prompt: "do it"`, `prompt: " "`, 1) }, job.CodeInvalidRequest},
		{"no prompt for another agent", "agent: {command: [codex, exec, fix it]}\n", func(s string) string { return strings.Replace(s, `prompt: "do it"`, `prompt: ""`, 1) }, ""},
		{"bad id", "", func(s string) string { return strings.Replace(s, "id: t1", "id: ../x", 1) }, job.CodeInvalidRequest},
		{"zero timeout", "lifecycle: {timeout: 0s}\n", nil, job.CodeInvalidRequest},
		{"over 168h", "lifecycle: {timeout: 169h}\n", nil, job.CodeInvalidRequest},
		{"8 days", "lifecycle: {timeout: 8d}\n", nil, job.CodeInvalidRequest},
		{"7 days ok", "lifecycle: {timeout: 7d}\n", nil, ""},
		{"bad failure action", "lifecycle: {failure_action: explode}\n", nil, job.CodeInvalidRequest},
		{"bad memory", "vm: {memory: lots}\n", nil, job.CodeInvalidRequest},
		{"memory without unit", "vm: {memory: \"512\"}\n", nil, job.CodeInvalidRequest},
		{"bad network", "vm: {network_mode: bridged}\n", nil, job.CodeInvalidRequest},
		{"secret bad source", "secrets: [{name: A, source: ldap, key: A}]\n", nil, job.CodeInvalidRequest},
		{"secret vault ok to parse", "secrets: [{name: A, source: vault, key: kv/a}]\n", nil, ""},
		{"secret by registered name only", "secrets: [{name: A}]\n", nil, ""},
		{"secret source without key", "secrets: [{name: A, source: env}]\n", nil, job.CodeInvalidRequest},
		{"secret key without source", "secrets: [{name: A, key: A}]\n", nil, job.CodeInvalidRequest},
		{"artifact patterns ok", "lifecycle: {artifact_patterns: [\"*.patch\", \"coverage/**/*\"]}\n", nil, ""},
		{"artifact pattern absolute", "lifecycle: {artifact_patterns: [/etc/passwd]}\n", nil, job.CodePathEscape},
		{"artifact pattern dotdot", "lifecycle: {artifact_patterns: [\"reports/../../x\"]}\n", nil, job.CodePathEscape},
		{"artifact pattern bad glob", "lifecycle: {artifact_patterns: [\"[\"]}\n", nil, job.CodeInvalidRequest},
		{"subpath escape", "", func(s string) string { return strings.Replace(s, "branch: main", "branch: main, subpath: ../x", 1) }, job.CodePathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := base + tt.extra
			if tt.edit != nil {
				doc = tt.edit(doc)
			}
			_, err := Parse([]byte(doc))
			if got := job.CodeOf(err); got != tt.code {
				t.Errorf("Parse = %q (%v), want %q", got, err, tt.code)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30m", 30 * time.Minute, true}, {"6h", 6 * time.Hour, true}, {"24h", 24 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true}, {"168h", 168 * time.Hour, true}, {"7d", 168 * time.Hour, true},
		{"168h1s", 0, false}, {"0", 0, false}, {"-1h", 0, false}, {"", 0, false}, {"soon", 0, false}, {"1.5d", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"512M", 512 << 20}, {"8G", 8 << 30}, {"16Gi", 16 << 30}, {"40GB", 40 << 30}, {"1T", 1 << 40}, {"64k", 64 << 10},
	}
	for _, tt := range tests {
		if got, err := ParseSize(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "G", "0G", "-1G", "12", "1.5G", "8X"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte(base + "lifecycle: {timeout: 6h}\nvm: {memory: 8G}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := Parse(data)
		if err != nil {
			return
		}
		if task.Metadata.ID == "" || task.Timeout() <= 0 || task.Timeout() > MaxTimeout || task.MemoryBytes() <= 0 {
			t.Fatalf("accepted an invalid task: %+v", task)
		}
	})
}

func TestParseChildInheritsMaxConcurrent(t *testing.T) {
	parent, err := Parse([]byte(base + "children: {max_concurrent: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		extra string
		want  int
	}{
		{"children: {wait_for_children: true}\n", 2},
		{"children: {max_concurrent: 1}\n", 1},
		{"children: {max_concurrent: 9}\n", 9}, // refused by the task store, not here
	}
	for _, tt := range tests {
		child, err := ParseChild([]byte(strings.Replace(base, "id: t1", "id: c1", 1)+tt.extra), parent)
		if err != nil {
			t.Fatal(err)
		}
		if got := child.Children.MaxConcurrent; got != tt.want {
			t.Errorf("ParseChild(%q).Children.MaxConcurrent = %d, want %d", tt.extra, got, tt.want)
		}
	}
}
