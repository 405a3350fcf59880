package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/agent/manifest"
	"github.com/agent-runner/agent-runner/job"
)

// env is a temp tree: <dir>/allowed/{app.log,nested/n.log}, <dir>/sibling/secret.log
type env struct {
	dir, allowed string
	g            *Gateway
}

func newEnv(t testing.TB, tools ...string) *env {
	t.Helper()
	dir := t.TempDir()
	allowed := filepath.Join(dir, "allowed")
	mustWrite(t, filepath.Join(allowed, "app.log"), "line1\nERROR one\nline3\nERROR two\n")
	mustWrite(t, filepath.Join(allowed, "nested", "n.log"), "ERROR nested\n")
	mustWrite(t, filepath.Join(dir, "sibling", "secret.log"), "SECRET\n")
	if len(tools) == 0 {
		tools = []string{"list_logs", "read_log", "tail_log", "grep_log"}
	}
	p := compile(t, dir, fmt.Sprintf("name: t\ncapabilities: {tools: [%s], filesystem: {read: [allowed]}}\nlimits: {max_tool_calls: 100}\n", strings.Join(tools, ", ")))
	return &env{dir: dir, allowed: allowed, g: New(p, nil, nil, WithCwd(dir))}
}

func compile(t testing.TB, dir, y string) *manifest.Policy {
	t.Helper()
	m, err := manifest.ParseYAML([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	p, err := manifest.Compile(m, dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (e *env) invoke(t *testing.T, tool string, args any) (json.RawMessage, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	return e.g.Invoke(context.Background(), tool, b)
}

func readContent(t *testing.T, e *env, p string) (string, job.Code) {
	t.Helper()
	out, err := e.invoke(t, "read_log", ReadLogArgs{Path: p})
	if err != nil {
		return "", job.CodeOf(err)
	}
	var r ReadLogResult
	json.Unmarshal(out, &r)
	return r.Content, ""
}

// The seed's gateway and path-policy tests.
func TestSeedPathPolicy(t *testing.T) {
	e := newEnv(t)
	must(t, os.Symlink(filepath.Join(e.dir, "sibling", "secret.log"), filepath.Join(e.allowed, "link.log")))
	tests := []struct {
		name, path, want string
		code             job.Code
	}{
		{"log_watcher inside allowlist", "allowed/app.log", "line1\nERROR one\nline3\nERROR two\n", ""},
		{"log_watcher_denies_outside_allowlist", filepath.Join(e.dir, "sibling", "secret.log"), "", job.CodePathEscape},
		{"dotdot_escape_sibling_directory_denied", "allowed/../sibling/secret.log", "", job.CodePathEscape},
		{"symlink_inside_allowlist_to_outside_target_denied", "allowed/link.log", "", job.CodePathEscape},
		{"allowed_file_via_normalized_path_ok", "allowed/nested/../../allowed/./app.log", "line1\nERROR one\nline3\nERROR two\n", ""},
		{"empty_path_string_denied", "", "", job.CodePathEscape},
		{"absolute path inside ok", filepath.Join(e.allowed, "nested", "n.log"), "ERROR nested\n", ""},
		{"etc hosts denied", "/etc/hosts", "", job.CodePathEscape},
		{"directory is not a file", "allowed/nested", "", job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, code := readContent(t, e, tt.path)
			if code != tt.code || got != tt.want {
				t.Errorf("read_log(%q) = %q, %q; want %q, %q", tt.path, got, code, tt.want, tt.code)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestToolDenied(t *testing.T) {
	e := newEnv(t, "tail_log")
	for _, tool := range []string{"read_log", "run_tests", "rm_rf"} {
		_, err := e.invoke(t, tool, map[string]string{"path": "allowed/app.log"})
		if got, want := job.CodeOf(err), job.CodeToolDenied; got != want {
			t.Errorf("%s: code = %q, want %q", tool, got, want)
		}
	}
	if got, want := len(e.g.Tools()), 1; got != want {
		t.Errorf("len(Tools()) = %d, want %d", got, want)
	}
}

func TestBadArgs(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		tool, args string
	}{
		{"read_log", `{"path": 3}`},
		{"read_log", `{"path": "allowed/app.log", "follow": true}`},
		{"read_log", `{"path": "x"} {}`},
		{"read_log", `{not json`},
		{"tail_log", `{"path": "allowed/app.log", "lines": 10001}`},
		{"tail_log", `{"path": "allowed/app.log", "lines": -1}`},
		{"grep_log", `{"path": "allowed", "pattern": ""}`},
	}
	for _, tt := range tests {
		_, err := e.g.Invoke(context.Background(), tt.tool, json.RawMessage(tt.args))
		if got, want := job.CodeOf(err), job.CodeInvalidRequest; got != want {
			t.Errorf("%s %s: code = %q (%v), want %q", tt.tool, tt.args, got, err, want)
		}
	}
}

func TestTail(t *testing.T) {
	e := newEnv(t)
	var many strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&many, "l%d\n", i)
	}
	mustWrite(t, filepath.Join(e.allowed, "many.log"), many.String())
	tests := []struct {
		lines     int
		wantN     int
		wantFirst string
	}{
		{0, 100, "l19901"},
		{3, 3, "l19998"},
		{10000, 10000, "l10001"},
	}
	for _, tt := range tests {
		out, err := e.invoke(t, "tail_log", TailLogArgs{Path: "allowed/many.log", Lines: tt.lines})
		if err != nil {
			t.Fatal(err)
		}
		var r TailLogResult
		json.Unmarshal(out, &r)
		if len(r.Lines) != tt.wantN || r.Lines[0] != tt.wantFirst || r.Lines[len(r.Lines)-1] != "l20000" {
			t.Errorf("tail %d: got %d lines from %q, want %d from %q", tt.lines, len(r.Lines), r.Lines[0], tt.wantN, tt.wantFirst)
		}
	}
	out, _ := e.invoke(t, "tail_log", TailLogArgs{Path: "allowed/app.log", Lines: 10})
	var r TailLogResult
	json.Unmarshal(out, &r)
	if want := []string{"line1", "ERROR one", "line3", "ERROR two"}; !cmp.Equal(r.Lines, want) {
		t.Errorf("tail of short file = %q, want %q", r.Lines, want)
	}
}

func TestReadCap(t *testing.T) {
	e := newEnv(t)
	mustWrite(t, filepath.Join(e.allowed, "big.log"), strings.Repeat("x", MaxReadBytes+10))
	out, err := e.invoke(t, "read_log", ReadLogArgs{Path: "allowed/big.log"})
	if err != nil {
		t.Fatal(err)
	}
	var r ReadLogResult
	json.Unmarshal(out, &r)
	if len(r.Content) != MaxReadBytes || !r.Truncated || r.SizeBytes != MaxReadBytes+10 {
		t.Errorf("read_log big: %d bytes truncated=%v size=%d, want %d true %d", len(r.Content), r.Truncated, r.SizeBytes, MaxReadBytes, MaxReadBytes+10)
	}
}

func TestGrepRecursiveSkipsSymlinks(t *testing.T) {
	e := newEnv(t)
	must(t, os.Symlink(filepath.Join(e.dir, "sibling"), filepath.Join(e.allowed, "escape")))
	must(t, os.Symlink(filepath.Join(e.dir, "sibling", "secret.log"), filepath.Join(e.allowed, "escape.log")))
	out, err := e.invoke(t, "grep_log", GrepLogArgs{Path: "allowed", Pattern: "E"})
	if err != nil {
		t.Fatal(err)
	}
	var r GrepLogResult
	json.Unmarshal(out, &r)
	var got []string
	for _, m := range r.Matches {
		got = append(got, fmt.Sprintf("%s:%d:%s", m.Path, m.Line, m.Text))
	}
	want := []string{"allowed/app.log:2:ERROR one", "allowed/app.log:4:ERROR two", "allowed/nested/n.log:1:ERROR nested"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("matches (-want +got):\n%s", diff)
	}
	if got, want := len(r.Skipped), 2; got != want {
		t.Errorf("skipped = %+v, want %d symlinks", r.Skipped, want)
	}
	if r.FilesSearched != 2 {
		t.Errorf("files searched = %d, want 2", r.FilesSearched)
	}
}

func TestListLogs(t *testing.T) {
	e := newEnv(t)
	out, err := e.invoke(t, "list_logs", ListLogsArgs{Directory: "allowed"})
	if err != nil {
		t.Fatal(err)
	}
	var r ListLogsResult
	json.Unmarshal(out, &r)
	want := []Entry{{Name: "app.log", Type: "file", SizeBytes: 32}, {Name: "nested", Type: "dir"}}
	if diff := cmp.Diff(want, r.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if _, err := e.invoke(t, "list_logs", ListLogsArgs{Directory: "sibling"}); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("list_logs sibling: err = %v, want path_escape", err)
	}
}

func TestCallLimitCountsDenials(t *testing.T) {
	dir := t.TempDir()
	p := compile(t, dir, "name: t\ncapabilities: {tools: [read_log], filesystem: {read: [a]}}\nlimits: {max_tool_calls: 2}\n")
	g := New(p, nil, nil, WithCwd(dir))
	for i, want := range []job.Code{job.CodePathEscape, job.CodeToolDenied, job.CodeLimitExceeded, job.CodeLimitExceeded} {
		tool := "read_log"
		if i == 1 {
			tool = "tail_log"
		}
		_, err := g.Invoke(context.Background(), tool, json.RawMessage(`{"path":"/etc/hosts"}`))
		if got := job.CodeOf(err); got != want {
			t.Errorf("call %d: code = %q, want %q", i+1, got, want)
		}
	}
	if got, want := g.CallsUsed(), int64(4); got != want {
		t.Errorf("CallsUsed = %d, want %d", got, want)
	}
}

func TestSchemas(t *testing.T) {
	e := newEnv(t, "grep_log", "run_tests")
	got := map[string]string{}
	for _, ti := range e.g.Tools() {
		got[ti.Name] = string(ti.InputSchema)
	}
	want := map[string]string{
		"grep_log":  `{"additionalProperties":false,"properties":{"max_matches":{"description":"stop after this many matches (default and maximum 1000)","type":"integer"},"path":{"description":"file or directory under a read root; directories are searched recursively","type":"string"},"pattern":{"description":"substring to find (not a regular expression)","type":"string"}},"required":["path","pattern"],"type":"object"}`,
		"run_tests": `{"additionalProperties":false,"properties":{"args":{"description":"arguments passed to the command","items":{"type":"string"},"type":"array"},"command":{"description":"absolute path of an allowlisted executable","type":"string"},"working_directory":{"description":"directory under a read root; the command runs in it, read-only unless it lies in a write root","type":"string"}},"required":["command","working_directory"],"type":"object"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schemas (-want +got):\n%s", diff)
	}
}

// TestInvokeSwapRace drives read_log through the gateway while a file and
// its parent directory are exchanged with symlinks to a secret outside the
// root; no result may carry the secret.
func TestInvokeSwapRace(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(e.dir, "sibling")
	mustWrite(t, filepath.Join(e.allowed, "d", "f.log"), "inside\n")
	must(t, os.Symlink(outside, filepath.Join(e.allowed, "d.evil")))
	mustWrite(t, filepath.Join(outside, "f.log"), "SECRET\n")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Rename(filepath.Join(e.allowed, "d"), filepath.Join(e.allowed, "d.tmp"))
			os.Rename(filepath.Join(e.allowed, "d.evil"), filepath.Join(e.allowed, "d"))
			os.Rename(filepath.Join(e.allowed, "d"), filepath.Join(e.allowed, "d.evil"))
			os.Rename(filepath.Join(e.allowed, "d.tmp"), filepath.Join(e.allowed, "d"))
		}
	}()
	defer func() { close(stop); <-done }()
	e.g.policy.Limits.MaxToolCalls = 1 << 30
	calls := map[string]string{"read_log": `{"path":"allowed/d/f.log"}`, "grep_log": `{"path":"allowed/d/f.log","pattern":"E"}`}
	ok := 0
	for i := 0; i < 2000; i++ {
		for tool, args := range calls {
			out, err := e.g.Invoke(context.Background(), tool, json.RawMessage(args))
			if strings.Contains(string(out), "SECRET") {
				t.Fatalf("round %d: %s escaped: %s", i, tool, out)
			}
			if code := job.CodeOf(err); code == job.CodeInvalidRequest {
				t.Fatalf("%s: %v", tool, err)
			} else if err == nil {
				ok++
			}
		}
	}
	t.Logf("%d reads inside the root, %d refused, 0 escapes", ok, 4000-ok)
}
