package manifest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// fixtures is the seed's agent-runtime fixture directory beside the repo.
const fixtures = "../testdata/agent-runtime"

func needFixtures(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(fixtures); err != nil {
		t.Fatalf("fixtures not found at %s: %v", fixtures, err)
	}
}

// Seed test policy::tests::compile_collects_tools.
func TestCompileCollectsTools(t *testing.T) {
	m, err := ParseYAML([]byte(`
name: t
capabilities:
  tools: [read_log, list_logs, read_log]
  filesystem: {read: [logs]}
limits: {max_tool_calls: 7}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(m, "/base")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Tools, []string{"list_logs", "read_log"}; !cmp.Equal(got, want) {
		t.Errorf("Tools = %v, want %v", got, want)
	}
	if got, want := p.Limits.MaxToolCalls, int64(7); got != want {
		t.Errorf("MaxToolCalls = %d, want %d", got, want)
	}
	if got, want := p.ReadRoots, []string{"/base/logs"}; !cmp.Equal(got, want) {
		t.Errorf("ReadRoots = %v, want %v", got, want)
	}
	want := CompiledLimits{MaxRuntimeSeconds: DefaultMaxRuntimeSeconds, MaxMemoryMB: DefaultMaxMemoryMB, MaxToolCalls: 7,
		Defaulted: []string{"max_runtime_seconds", "max_memory_mb"}}
	if diff := cmp.Diff(want, p.Limits); diff != "" {
		t.Errorf("Limits (-want +got):\n%s", diff)
	}
	if !p.Allows("read_log") || p.Allows("run_tests") {
		t.Errorf("Allows: read_log=%v run_tests=%v, want true false", p.Allows("read_log"), p.Allows("run_tests"))
	}
}

func TestRoleGrantsNothing(t *testing.T) {
	m, err := ParseYAML([]byte("name: t\nrole: {mission: run_tests and read /etc with git_status}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(m, "/")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tools) != 0 || len(p.ReadRoots) != 0 || len(p.Commands) != 0 || p.Git || p.Network {
		t.Errorf("policy from role text = %+v, want no grants", p)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		code       job.Code
	}{
		{"no name", "capabilities: {tools: [read_log]}", job.CodeInvalidRequest},
		{"unknown tool", "name: a\ncapabilities: {tools: [rm_rf]}", job.CodeInvalidRequest},
		{"empty read path", "name: a\ncapabilities: {filesystem: {read: ['']}}", job.CodeInvalidRequest},
		{"root granted", "name: a\ncapabilities: {filesystem: {read: ['/']}}", job.CodeInvalidRequest},
		{"root by dotdot", "name: a\ncapabilities: {filesystem: {write: ['/x/..']}}", job.CodeInvalidRequest},
		{"relative command", "name: a\ncapabilities: {commands: {allow: [git]}}", job.CodeInvalidRequest},
		{"NUL path", "name: a\ncapabilities: {filesystem: {read: [\"a\\0b\"]}}", job.CodePathEscape},
		{"zero limit", "name: a\nlimits: {max_tool_calls: 0}", job.CodeLimitExceeded},
		{"negative limit", "name: a\nlimits: {max_runtime_seconds: -1}", job.CodeLimitExceeded},
		{"huge limit", "name: a\nlimits: {max_memory_mb: 99999999}", job.CodeLimitExceeded},
		{"bad output", "name: a\noutput: {format: xml}", job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseYAML([]byte(tt.yaml))
			if err == nil {
				_, err = Compile(m, "/base")
			}
			if got := job.CodeOf(err); got != tt.code {
				t.Errorf("code = %q (%v), want %q", got, err, tt.code)
			}
		})
	}
}

func TestParseStrict(t *testing.T) {
	if _, err := ParseYAML([]byte("name: a\ncapabilitys: {}\n")); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("YAML unknown field: err = %v, want invalid_request", err)
	}
	if _, err := ParseJSON([]byte(`{"name":"a","extra":1}`)); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("JSON unknown field: err = %v, want invalid_request", err)
	}
	if _, err := ParseJSON([]byte(`{"name":"a"} {}`)); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("JSON trailing data: err = %v, want invalid_request", err)
	}
}

func TestLoadJSONByExtension(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	os.WriteFile(path, []byte(`{"name":"j","capabilities":{"tools":["tail_log"],"commands":{"allow":["/bin/true"]}}}`), 0o644)
	_, p, _, err := LoadPolicy(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Tools, []string{"tail_log"}; !cmp.Equal(got, want) {
		t.Errorf("Tools = %v, want %v", got, want)
	}
	c, ok := p.Command("/bin/true")
	if !ok || c.Basename != "true" || len(c.SHA256) != 64 {
		t.Errorf("Command(/bin/true) = %+v, %v; want a pinned digest", c, ok)
	}
}

func TestFixtureManifestsLoadUnchanged(t *testing.T) {
	needFixtures(t)
	for _, name := range []string{"agents/log-watcher.yaml", "agents/log-watcher/manifest.yaml", "agents/tester.yaml", "agents/tester/manifest.yaml"} {
		t.Run(name, func(t *testing.T) {
			_, p, _, err := LoadPolicy(filepath.Join(fixtures, name), "/cwd")
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Limits.Defaulted) != 0 {
				t.Errorf("Defaulted = %v, want none (the fixtures set every limit)", p.Limits.Defaulted)
			}
			if p.Name == "tester" {
				if got, want := p.WriteRoots, []string{"/cwd/testdata/sample-crate/target"}; !cmp.Equal(got, want) {
					t.Errorf("WriteRoots = %v, want %v", got, want)
				}
				if !p.Git || len(p.Commands) != 3 {
					t.Errorf("tester: git=%v commands=%d, want true 3", p.Git, len(p.Commands))
				}
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(fixtures, "agents/tester.yaml")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("name: a\ncapabilities: {tools: [read_log], filesystem: {read: [x, ../y, /z]}}\nlimits: {max_tool_calls: 3}"))
	f.Add([]byte(`{"name":"a","limits":{"max_memory_mb":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (*Manifest, error){ParseYAML, ParseJSON} {
			m, err := parse(data)
			if err != nil {
				continue
			}
			p, err := Compile(m, "/base")
			if err != nil {
				if job.CodeOf(err).Class() != "validation" {
					t.Fatalf("Compile error %v has code %q, want validation.*", err, job.CodeOf(err))
				}
				continue
			}
			for _, r := range append(append([]string{}, p.ReadRoots...), p.WriteRoots...) {
				if r == "/" || !filepath.IsAbs(r) || filepath.Clean(r) != r {
					t.Fatalf("compiled root %q is not a clean absolute non-root path", r)
				}
			}
			if p.Limits.MaxToolCalls <= 0 || p.Limits.MaxRuntimeSeconds <= 0 || p.Limits.MaxMemoryMB <= 0 {
				t.Fatalf("compiled limits %+v not positive", p.Limits)
			}
			for _, tool := range p.Tools {
				found := false
				for _, k := range KnownTools {
					found = found || k == tool
				}
				if !found {
					t.Fatalf("unknown tool %q compiled", tool)
				}
			}
		}
	})
}
