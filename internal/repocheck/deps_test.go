package repocheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The intended shape of the module, as rules over its import graph (the
// non-test files of each package: tests may import anything). Packages are
// named by their path below the module.

// domains hold what agent-runner does: beneath every door, known to no
// transport, blind to which backend runs them.
var domains = []string{
	// The job contract and the services over it.
	"job", "jobs", "runner",
	// The pipeline's stages and the records it writes.
	"validation", "policy", "snapshot", "capture", "artifact", "store",
	"buildcache", "workspaceroot", "egress", "secretfile",
	// Agent tasks.
	"task/manifest", "task/state", "task/stage", "task/agentstep", "task/lifecycle", "task/taskstore",
	// Capability runs.
	"agent/manifest", "agent/audit", "agent/gateway", "agent/launch", "agent/loop", "agent/rootfs", "agent/runs",
	// Sessions (kept sandboxes).
	"session",
	// Images.
	"image",
}

// services are the domain services the doors call.
var services = []string{"jobs", "task/taskstore", "agent/runs", "session"}

// doors are the HTTP doors: each turns requests into calls of a domain.
var doors = []string{"door/httpapi", "door/taskapi", "door/agentapi", "door/sessionapi", "door/e2bapi", "door/mcpserver", "door/ui", "door/imageapi"}

// knownIssue is the issue whose work removes every known exception below.
const knownIssue = `"One sandbox primitive under every door"`

// rules are the dependency rules TestDependencyRules holds the module to.
var rules = []rule{{
	name: "backend-implementations",
	why:  "only the runner, the doctor (hostcheck), command wiring (cmd/), benches and tests pick a backend implementation; everything else is handed a backend.Backend",
	applies: func(_ graph, p string) bool {
		return !underAny(p, "runner", "hostcheck", "cmd", "bench") && !testHelper(p)
	},
	forbids: func(_ graph, p, imp string) bool {
		return backendImpl(imp) && backendRoot(imp) != backendRoot(p)
	},
}, {
	name: "http-doors",
	why:  "HTTP doors stand beside each other, above the domains: only cmd/ mounts one (and benches and tests call one)",
	applies: func(_ graph, p string) bool {
		return !underAny(p, "cmd", "bench") && !testHelper(p)
	},
	forbids: func(_ graph, p, imp string) bool {
		return doorOf(imp) != "" && doorOf(imp) != doorOf(p)
	},
}, {
	name:       "domains-beneath-doors",
	why:        "a domain never depends on an HTTP door, not even through another package",
	applies:    func(_ graph, p string) bool { return slices.Contains(domains, p) },
	forbids:    func(_ graph, _, imp string) bool { return doorOf(imp) != "" },
	transitive: true,
}, {
	name:    "services-speak-no-http",
	why:     "the domain services (jobs, agent tasks, capability runs) are known to no transport: their HTTP doors read requests and write answers over them",
	applies: func(_ graph, p string) bool { return slices.Contains(services, p) },
	forbids: func(_ graph, _, imp string) bool { return imp == "net/http" },
}, {
	name:    "job-is-the-contract",
	why:     "package job, the contract every door and backend shares, depends on the standard library only, and on no transport or process (net/http, os/exec)",
	applies: func(_ graph, p string) bool { return p == "job" },
	forbids: func(g graph, _, imp string) bool {
		return !g.std[imp] || imp == "net/http" || imp == "os/exec"
	},
	transitive: true,
}, {
	name:    "transport-knows-no-domain",
	why:     "the queue and the record mirror (remote) carry the job contract and run records; they import no domain's internals: task/, agent/, the runner and its stages, the services above the queue",
	applies: func(_ graph, p string) bool { return underAny(p, "queue", "remote") },
	forbids: func(_ graph, _, imp string) bool {
		return underAny(imp, "task", "agent", "runner", "jobs", "worker", "plane",
			"validation", "policy", "snapshot", "capture", "artifact", "buildcache", "egress", "secretfile")
	},
}, {
	name:    "backends-stand-alone",
	why:     "a backend depends on the backend interface and the contract, never on the doors, the pipeline, the queue or command wiring",
	applies: func(_ graph, p string) bool { return backendImpl(p) },
	forbids: func(_ graph, _, imp string) bool {
		return doorOf(imp) != "" || underAny(imp, "cmd", "runner", "jobs", "queue", "worker", "remote", "plane", "task", "agent")
	},
	transitive: true,
}}

// testHelper reports whether p is a package that only tests use
// (backendtest, tasktest, uitest, logtest: named as net/http/httptest).
func testHelper(p string) bool {
	return strings.HasSuffix(p[strings.LastIndex(p, "/")+1:], "test")
}

// backendImpl reports whether p is (part of) a backend implementation,
// backend/<kind>: any kind, today's or a new one.
func backendImpl(p string) bool {
	return strings.HasPrefix(p, "backend/") && !testHelper(backendRoot(p)) && !slices.Contains(backendShared, backendRoot(p))
}

// backendShared are the packages under backend/ that are no backend
// but what several share (the seccomp allow-list linux_sandbox compiles
// and oci hands its runtime), so a backend may import them.
var backendShared = []string{"backend/syscallpolicy"}

// backendRoot is backend/<kind> for a package under it.
func backendRoot(p string) string {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 2 || parts[0] != "backend" {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// doorOf is the door p belongs to, or "" (a door's test helpers, such as
// ui/uitest, are not the door).
func doorOf(p string) string {
	if testHelper(p) {
		return ""
	}
	for _, d := range doors {
		if under(p, d) {
			return d
		}
	}
	return ""
}

// A rule forbids some of the module's packages some imports.
type rule struct {
	name string
	// why is reported with every violation.
	why string
	// applies reports whether package p is held to the rule.
	applies func(g graph, p string) bool
	// forbids reports whether p may not import imp (with transitive,
	// depend on imp through any chain of imports).
	forbids    func(g graph, p, imp string) bool
	transitive bool
	// known are today's violations, each with the issue whose work
	// removes it. The rule lets them pass, and fails once one no longer
	// occurs (delete it then), so the list only shrinks.
	known map[[2]string]string
}

// violation is package pkg importing (or depending on, through via) imp.
type violation struct {
	rule     string
	pkg, imp string
	via      []string
}

func (v violation) String() string {
	if len(v.via) == 0 {
		return fmt.Sprintf("%s: %s imports %s", v.rule, v.pkg, v.imp)
	}
	return fmt.Sprintf("%s: %s depends on %s via %s", v.rule, v.pkg, v.imp, strings.Join(v.via, " -> "))
}

// check returns the rule's violations in g, known ones included, in order.
func (r rule) check(g graph) []violation {
	var out []violation
	for _, p := range slices.Sorted(maps.Keys(g.imports)) {
		if !g.own[p] || !r.applies(g, p) {
			continue
		}
		if !r.transitive {
			for _, imp := range g.imports[p] {
				if r.forbids(g, p, imp) {
					out = append(out, violation{rule: r.name, pkg: p, imp: imp})
				}
			}
			continue
		}
		// Breadth first, so the chain reported is a shortest one; a
		// forbidden package is reported, not walked through.
		parent := map[string]string{p: ""}
		queue := []string{p}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, imp := range g.imports[cur] {
				if _, seen := parent[imp]; seen {
					continue
				}
				parent[imp] = cur
				if !r.forbids(g, p, imp) {
					queue = append(queue, imp)
					continue
				}
				var via []string
				for q := cur; q != p; q = parent[q] {
					via = append([]string{q}, via...)
				}
				out = append(out, violation{rule: r.name, pkg: p, imp: imp, via: via})
			}
		}
	}
	return out
}

// unknownViolations are the violations of rs in g that no rule's known
// list names, and stale are the known ones that no longer occur.
func unknownViolations(g graph, rs []rule) (unknown []violation, stale []string) {
	for _, r := range rs {
		seen := map[[2]string]bool{}
		for _, v := range r.check(g) {
			edge := [2]string{v.pkg, v.imp}
			if _, ok := r.known[edge]; ok {
				seen[edge] = true
				continue
			}
			unknown = append(unknown, v)
		}
		for _, edge := range slices.SortedFunc(maps.Keys(r.known), func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) }) {
			if !seen[edge] {
				stale = append(stale, fmt.Sprintf("%s: %s no longer imports %s: delete it from the rule's known list", r.name, edge[0], edge[1]))
			}
		}
	}
	return unknown, stale
}

func TestDependencyRules(t *testing.T) {
	g := moduleGraph(t)
	unknown, stale := unknownViolations(g, rules)
	why := map[string]string{}
	for _, r := range rules {
		why[r.name] = r.why
	}
	for _, v := range unknown {
		t.Errorf("%s\n\t(%s)", v, why[v.rule])
	}
	for _, s := range stale {
		t.Error(s)
	}
	// A rule that names a package the module no longer has protects
	// nothing: rename it here with the package.
	named := slices.Concat(domains, doors, services)
	for _, r := range rules {
		for edge := range r.known {
			named = append(named, edge[0], edge[1])
		}
	}
	for _, p := range named {
		if !g.own[p] {
			t.Errorf("the dependency rules name %s, which is not a package of the module", p)
		}
	}
}

// fakeGraph is a graph of the module's packages given by their imports;
// a package outside the map whose first element is one of the standard
// library's here (errors, fmt, net, os, testing) is standard, and one
// whose first element has a dot is another module's.
func fakeGraph(imports map[string][]string) graph {
	g := graph{imports: imports, own: map[string]bool{}, std: map[string]bool{}}
	stdRoot := func(p string) bool {
		first, _, _ := strings.Cut(p, "/")
		return slices.Contains([]string{"errors", "fmt", "net", "os", "testing"}, first)
	}
	for p, imps := range imports {
		for _, q := range append([]string{p}, imps...) {
			g.std[q] = stdRoot(q)
			g.own[q] = !stdRoot(q) && !strings.Contains(strings.SplitN(q, "/", 2)[0], ".")
		}
	}
	return g
}

// todaysShape is a small module shaped as this one is today, with its
// known exceptions.
func todaysShape() map[string][]string {
	return map[string][]string{
		"job":                  {"errors", "fmt"},
		"store":                {"job"},
		"backend":              {"job"},
		"backend/backendtest":  {"backend", "testing"},
		"backend/linuxsandbox": {"backend", "egress", "job", "os/exec"},
		"backend/localprocess": {"backend", "job", "os/exec"},
		"egress":               {"job", "net/http"},
		"policy":               {"backend", "job"},
		"runner":               {"backend", "policy", "store", "job"},
		"queue":                {"job", "github.com/nats-io/nats.go"},
		"remote":               {"job", "queue", "store"},
		"task/taskremote":      {"queue", "remote", "task/agentstep", "task/state"},
		"jobs":                 {"job", "queue", "runner"},
		"worker":               {"queue", "runner"},
		"plane":                {"jobs", "queue", "runner", "worker"},
		"task/state":           {"job", "store"},
		"task/agentstep":       {"backend", "job"},
		"task/taskstore":       {"store", "task/agentstep", "task/state"},
		"door/taskapi":         {"door/httpreply", "net/http", "task/taskstore"},
		"task/tasktest":        {"backend/linuxsandbox", "backend/localprocess"},
		"agent/launch":         {"jobs", "plane", "store"},
		"agent/runs":           {"agent/launch", "queue", "store"},
		"door/agentapi":        {"agent/runs", "door/httpreply", "net/http"},
		"door/httpapi":         {"door/httpreply", "job", "jobs", "net/http"},
		"door/mcpserver":       {"agent/launch", "jobs"},
		"door/ui":              {"door/httpreply", "store"},
		"ui/uitest":            {"door/ui"},
		"hostcheck":            {"backend", "backend/linuxsandbox"},
		"bench/sandbox":        {"backend/linuxsandbox", "runner"},
		"cmd/agent-runner": {"agent/runs", "door/agentapi", "backend/linuxsandbox", "backend/localprocess", "door/httpapi",
			"jobs", "door/mcpserver", "queue", "remote", "runner", "door/taskapi", "door/ui", "door/imageapi"},
	}
}

// TestDependencyRulesCatchViolations shows each rule failing on a
// violation added to todaysShape, and passing what it allows.
func TestDependencyRulesCatchViolations(t *testing.T) {
	tests := []struct {
		name string
		add  map[string][]string // imports added to todaysShape
		want []string
	}{
		{"today's shape with its known exceptions", nil, nil},
		{"a domain imports a backend", map[string][]string{"policy": {"backend/linuxsandbox"}},
			[]string{"backend-implementations: policy imports backend/linuxsandbox"}},
		{"a new backend is one too", map[string][]string{"jobs": {"backend/gvisor"}, "backend/gvisor": {"backend"}},
			[]string{"backend-implementations: jobs imports backend/gvisor"}},
		{"a backend imports another", map[string][]string{"backend/localprocess": {"backend/linuxsandbox"}},
			[]string{"backend-implementations: backend/localprocess imports backend/linuxsandbox"}},
		{"backends share what is no backend", map[string][]string{"backend/localprocess": {"backend/syscallpolicy"}}, nil},
		{"the runner, the doctor, cmd, benches and tests may pick one", map[string][]string{
			"runner": {"backend/localprocess"}, "hostcheck": {"backend/localprocess"},
			"bench/pipeline": {"backend/localprocess"}, "internal/logtest": {"backend/localprocess"},
		}, nil},
		{"a domain imports a door", map[string][]string{"task/state": {"door/taskapi"}}, []string{
			"http-doors: task/state imports door/taskapi",
			"domains-beneath-doors: task/state imports door/taskapi",
			"domains-beneath-doors: task/taskstore depends on door/taskapi via task/state",
		}},
		{"a domain depends on a door through another package", map[string][]string{"plane": {"door/httpapi"}}, []string{
			"http-doors: plane imports door/httpapi",
			"domains-beneath-doors: agent/launch depends on door/httpapi via plane",
			"domains-beneath-doors: agent/runs depends on door/httpapi via agent/launch -> plane",
		}},
		{"a service speaks HTTP", map[string][]string{"agent/runs": {"net/http"}},
			[]string{"services-speak-no-http: agent/runs imports net/http"}},
		{"a door imports another", map[string][]string{"door/mcpserver": {"door/ui"}},
			[]string{"http-doors: door/mcpserver imports door/ui"}},
		{"job imports the project", map[string][]string{"job": {"store"}},
			[]string{"job-is-the-contract: job imports store"}},
		{"job imports net/http", map[string][]string{"job": {"net/http"}},
			[]string{"job-is-the-contract: job imports net/http"}},
		{"job depends on net/http through the standard library", map[string][]string{"job": {"net/http/httptrace"}, "net/http/httptrace": {"net/http"}},
			[]string{"job-is-the-contract: job depends on net/http via net/http/httptrace"}},
		{"job imports another module", map[string][]string{"job": {"github.com/google/uuid"}},
			[]string{"job-is-the-contract: job imports github.com/google/uuid"}},
		{"the queue imports a task's internals", map[string][]string{"queue": {"task/state"}},
			[]string{"transport-knows-no-domain: queue imports task/state"}},
		{"remote imports a pipeline stage", map[string][]string{"remote": {"policy"}},
			[]string{"transport-knows-no-domain: remote imports policy"}},
		{"remote imports an agent's", map[string][]string{"remote": {"agent/launch"}},
			[]string{"transport-knows-no-domain: remote imports agent/launch"}},
		{"a backend depends on the queue", map[string][]string{"egress": {"queue"}},
			[]string{"backends-stand-alone: backend/linuxsandbox depends on queue via egress"}},
	}
	caught := map[string]bool{}
	for _, tt := range tests {
		shape := todaysShape()
		for p, imps := range tt.add {
			shape[p] = append(shape[p], imps...)
		}
		unknown, stale := unknownViolations(fakeGraph(shape), rules)
		var got []string
		for _, v := range unknown {
			got = append(got, v.String())
			caught[v.rule] = true
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: violations (-want +got):\n%s", tt.name, diff)
		}
		if len(stale) > 0 {
			t.Errorf("%s: stale known exceptions %q, want none", tt.name, stale)
		}
	}
	for _, r := range rules {
		if !caught[r.name] {
			t.Errorf("no case shows rule %s failing", r.name)
		}
	}
}

// TestKnownExceptionsOnlyShrink: a known exception that no longer occurs
// fails the rules until it is deleted from the list.
func TestKnownExceptionsOnlyShrink(t *testing.T) {
	withKnown := slices.Clone(rules)
	for i, r := range withKnown {
		if r.name == "transport-knows-no-domain" {
			// An exception the module once had (remote imported the
			// runner), listed but gone.
			r.known = map[[2]string]string{{"remote", "runner"}: knownIssue}
			withKnown[i] = r
		}
	}
	_, stale := unknownViolations(fakeGraph(todaysShape()), withKnown)
	want := []string{"transport-knows-no-domain: remote no longer imports runner: delete it from the rule's known list"}
	if diff := cmp.Diff(want, stale); diff != "" {
		t.Errorf("stale exceptions (-want +got):\n%s", diff)
	}
}
