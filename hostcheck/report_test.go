package hostcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
)

// goodHost is a fake hybrid host where every check passes.
func goodHost(t *testing.T) Host {
	files := merge(hybridHost, map[string]string{
		"/proc/sys/kernel/osrelease":             "6.18.0\n",
		"/proc/sys/user/max_user_namespaces":     "96365\n",
		"/proc/self/status":                      "Seccomp:\t0\n",
		"/proc/sys/kernel/seccomp/actions_avail": "kill_process kill_thread trap errno allow\n",
		"/proc/filesystems":                      "nodev\toverlay\n",
		"/dev/loop-control":                      "",
	})
	return Host{Root: fakeRoot(t, files), UID: 0, Arch: "amd64",
		LandlockABI:     func() (int, error) { return 7, nil },
		OverlayInUserns: func(context.Context, string) error { return nil },
	}
}

// reachableStore is a store path under directories others can search.
func reachableStore(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agent-runner-runs")
}

func TestRun(t *testing.T) {
	sandbox := fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: everything}}
	local := fakeBackend{kind: "local", caps: backend.Capabilities{Enforces: []string{"timeout", "output"}}}
	opt := Options{StoreDir: reachableStore(t), Backends: []backend.Backend{local, sandbox}, DefaultBackend: "sandbox"}

	r := Run(context.Background(), goodHost(t), opt)
	if !r.OK || len(r.Failed()) != 0 {
		t.Fatalf("OK = %v, failed %v, want a passing report: %+v", r.OK, r.Failed(), r.Checks)
	}
	if r.Host.Kernel != "6.18.0" || r.Host.StoreDir != opt.StoreDir || r.SchemaVersion != 1 {
		t.Errorf("host = %+v, schema %d", r.Host, r.SchemaVersion)
	}
	var sections []string
	for _, c := range r.Checks {
		if len(sections) == 0 || sections[len(sections)-1] != c.Section {
			sections = append(sections, c.Section)
		}
	}
	if diff := cmp.Diff(Sections, sections); diff != "" {
		t.Errorf("sections in report order (-want +got):\n%s", diff)
	}

	// One failing requirement of the default backend fails the report: a
	// root runner's sandbox uid cannot reach a private TMPDIR.
	if os.Getuid() != 0 {
		t.Skip("the sandbox_tmpdir requirement applies to a root runner")
	}
	t.Setenv("TMPDIR", privateTmp(t))
	r = Run(context.Background(), goodHost(t), opt)
	if diff := cmp.Diff([]string{"sandbox_tmpdir"}, r.Failed()); r.OK || diff != "" {
		t.Errorf("OK = %v, failed (-want +got):\n%s", r.OK, diff)
	}
}

// The JSON field names are the documented schema (docs/operations.md).
func TestReportJSON(t *testing.T) {
	sandbox := fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: without("host_ids")}}
	h := goodHost(t)
	h.UID = 1000
	r := Run(context.Background(), h, Options{StoreDir: reachableStore(t), Backends: []backend.Backend{sandbox}, DefaultBackend: "sandbox"})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SchemaVersion  int              `json:"schema_version"`
		OK             bool             `json:"ok"`
		DefaultBackend string           `json:"default_backend"`
		Host           map[string]any   `json:"host"`
		Checks         []map[string]any `json:"checks"`
		Backends       []map[string]any `json:"backends"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("report JSON has fields beyond the schema: %v", err)
	}
	keys := func(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
	if diff := cmp.Diff([]string{"arch", "kernel", "store_dir", "uid"}, keys(doc.Host)); diff != "" {
		t.Errorf("host keys (-want +got):\n%s", diff)
	}
	for _, c := range doc.Checks {
		want := []string{"found", "name", "section", "status"}
		if c["status"] != "ok" && c["status"] != "info" {
			want = []string{"fix", "found", "name", "section", "status"}
		}
		if diff := cmp.Diff(want, keys(c)); diff != "" {
			t.Errorf("check %v keys (-want +got):\n%s", c["name"], diff)
		}
	}
	if diff := cmp.Diff([]string{"available", "default", "enforced", "fix", "isolating", "kind", "not_enforced", "status"}, keys(doc.Backends[0])); diff != "" {
		t.Errorf("backend keys (-want +got):\n%s", diff)
	}
	ne := doc.Backends[0]["not_enforced"].([]any)[0].(map[string]any)
	if diff := cmp.Diff([]string{"check", "limit", "why"}, keys(ne)); diff != "" {
		t.Errorf("not_enforced keys (-want +got):\n%s", diff)
	}
}

func TestWriteText(t *testing.T) {
	sandbox := fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: everything}}
	store := filepath.Join(t.TempDir(), "store")
	if os.Getuid() != 0 {
		t.Skip("the sandbox_tmpdir requirement applies to a root runner")
	}
	tmp := privateTmp(t)
	t.Setenv("TMPDIR", tmp)
	r := Run(context.Background(), goodHost(t), Options{StoreDir: store, Backends: []backend.Backend{sandbox}, DefaultBackend: "sandbox"})
	var out bytes.Buffer
	if err := WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range append(append([]string{}, Sections...),
		"backends",
		"  fail  sandbox_tmpdir",
		"fix: chmod o+x "+filepath.Dir(filepath.Dir(filepath.Dir(tmp)))+" "+filepath.Dir(tmp)+",",
		"  ok    sandbox (default, isolating, available)",
		"FAIL: sandbox is not ready: sandbox_tmpdir failed; each has a fix line above (exit 1)",
	) {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

// privateTmp is a temporary directory inside one others cannot search.
func privateTmp(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "private")
	os.Mkdir(dir, 0o700)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o1777)
	return tmp
}
