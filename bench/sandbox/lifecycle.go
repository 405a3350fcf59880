package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/localprocess"
)

// phases collects one duration per iteration for each named phase, in
// the order first seen.
type phases struct {
	names []string
	ds    map[string][]time.Duration
}

func (p *phases) add(name string, d time.Duration) {
	if p.ds == nil {
		p.ds = map[string][]time.Duration{}
	}
	if _, ok := p.ds[name]; !ok {
		p.names = append(p.names, name)
	}
	p.ds[name] = append(p.ds[name], d)
}

func (p *phases) print(title string) {
	fmt.Printf("\n%-44s %10s %10s %10s\n", title, "min", "median", "max")
	for _, name := range p.names {
		ds := p.ds[name]
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
		fmt.Printf("%-44s %10s %10s %10s\n", name, r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]))
	}
}

// lifecycleComparison measures, n times each, a kept sandbox's lifecycle
// phase by phase (create: host preparation, namespaces and cgroups, the
// init ready on its control socket; start; exit with output drained;
// delete) and the one-shot Run, which is that lifecycle, on
// linux_sandbox, then both on local_process.
func lifecycleComparison(n int, ws string) {
	sbx, err := linuxsandbox.New(backend.Config{})
	check(err)
	if err := sbx.Available(context.Background()); err != nil {
		fmt.Println("linux_sandbox unavailable:", err)
	} else {
		lifecyclePhases(n, sbx, ws, func(s backend.Sandbox, p *phases) {
			cp := s.(*linuxsandbox.Sandbox).CreatePhases()
			p.add("  create: host preparation", cp.Prepare)
			p.add("  create: namespaces, cgroups, config sent", cp.Boot)
			p.add("  create: init ready on the control socket", cp.Ready)
		})
	}
	lifecyclePhases(n, localprocess.Backend{}, ws, nil)
}

// lifecyclePhases measures b's lifecycle and one-shot Run; createPhases,
// when set, adds the backend's own split of Create.
func lifecyclePhases(n int, b backend.Backend, ws string, createPhases func(backend.Sandbox, *phases)) {
	ctx := context.Background()
	var p phases
	for range n {
		spec := benchSpec(ws)
		t0 := time.Now()
		s, err := b.(backend.Sandboxes).Create(ctx, spec)
		check(err)
		t1 := time.Now()
		proc, err := s.Start(ctx, backend.Exec{Argv: []string{"/bin/true"}, Env: spec.Env})
		check(err)
		t2 := time.Now()
		o, err := proc.Wait(ctx)
		check(err)
		if o.ExitCode == nil || *o.ExitCode != 0 {
			check(fmt.Errorf("%s: /bin/true: %s %s", b.Kind(), o.Reason, o.Signal))
		}
		t3 := time.Now()
		check(s.Delete(ctx))
		t4 := time.Now()
		p.add("create", t1.Sub(t0))
		if createPhases != nil {
			createPhases(s, &p)
		}
		p.add("start (process running)", t2.Sub(t1))
		p.add("wait (exited, output drained)", t3.Sub(t2))
		p.add("delete", t4.Sub(t3))
		p.add("create + start + wait + delete", t4.Sub(t0))
		t5 := time.Now()
		check(backendRun(b, ws))
		p.add("one-shot Run", time.Since(t5))
	}
	p.print(fmt.Sprintf("%s lifecycle, %d runs", b.Kind(), n))
}
