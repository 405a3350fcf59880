package main

import (
	"fmt"
	"strconv"
)

// remoteMode measures /bin/true jobs on kind twice, side by side: on a
// serve running them on its own workers, and on a serve with --no-workers
// and --nats-listen whose jobs an `agent-runner worker --nats` process
// runs (the network path; both nodes share one store, as a worker must
// today). Each level alternates b.Rounds rounds between the two, so that
// the other load on a shared machine falls on both alike, and prints the
// remote path's cost above the local one.
func (b *bench) remoteMode(kind string) error {
	workers := strconv.Itoa(b.Workers)
	localArgs := b.jobServeArgs(kind)
	local, err := b.startServe(b.store("own-workers"), localArgs...)
	if err != nil {
		return err
	}
	defer local.stop()

	natsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	store := b.store("remote")
	apiArgs := append([]string{"--no-workers", "--nats-listen", natsAddr, "--queue-capacity", "100000"}, backendArgs(kind)...)
	api, err := b.startServe(store, append(apiArgs, b.ServerArgs...)...)
	if err != nil {
		return err
	}
	defer api.stop()
	workerArgs := append([]string{"--workers", workers}, backendArgs(kind)...)
	w, err := b.startWorker(store, "nats://"+natsAddr, workerArgs...)
	if err != nil {
		return err
	}
	defer w.stop()

	body := jobBody(b.ws, kind, b.AllowShell)
	fmt.Fprintf(b.Out, "== remote (%s): /bin/true jobs, %d per level in %d alternating rounds\n", kind, b.Jobs, b.Rounds)
	fmt.Fprintf(b.Out, "own workers:   serve %v\n", localArgs)
	fmt.Fprintf(b.Out, "remote worker: serve %v\n               worker --nats nats://%s %v (same store)\n", apiArgs, natsAddr, workerArgs)
	// Warm-up, not counted: the remote one waits for the worker to join.
	for _, s := range []*server{local, api} {
		if err := b.runJob(s.client, body, kind); err != nil {
			return err
		}
	}
	rounds := max(1, b.Rounds)
	var diffs []string
	for _, conc := range b.Levels {
		var own, remote sample
		for r := 0; r < rounds; r++ {
			n := b.Jobs / rounds
			if r < b.Jobs%rounds {
				n++
			}
			if n == 0 {
				continue
			}
			for _, side := range []struct {
				s   *server
				acc *sample
			}{{local, &own}, {api, &remote}} {
				smp, err := measure(conc, n, func(int) error { return b.runJob(side.s.client, body, kind) })
				if err != nil {
					return err
				}
				side.acc.add(smp)
			}
		}
		o, r := own.summary(), remote.summary()
		fmt.Fprintf(b.Out, "\nconcurrency %d\n", conc)
		fmt.Fprintf(b.Out, "%-14s", "")
		printHeader(b.Out, "jobs")
		fmt.Fprintf(b.Out, "%-14s", "own workers")
		printRow(b.Out, o)
		fmt.Fprintf(b.Out, "%-14s", "remote worker")
		printRow(b.Out, r)
		diffs = append(diffs, fmt.Sprintf("concurrency %d: mean %+.2fms, p50 %+.2fms, p95 %+.2fms, p99 %+.2fms, max %+.2fms",
			conc, msf(r.Mean-o.Mean), msf(r.P50-o.P50), msf(r.P95-o.P95), msf(r.P99-o.P99), msf(r.Max-o.Max)))
	}
	fmt.Fprintf(b.Out, "\nremote worker minus own workers (goal: at most +2ms per job):\n")
	for _, d := range diffs {
		fmt.Fprintln(b.Out, "  "+d)
	}
	for _, p := range []struct {
		name string
		p    *proc
	}{{"serve (own workers)", local.proc}, {"serve --no-workers", api.proc}, {"worker", w}} {
		m, err := p.p.memory()
		if err != nil {
			return err
		}
		fmt.Fprintf(b.Out, "%s RSS: %s\n", p.name, m)
	}
	return nil
}
