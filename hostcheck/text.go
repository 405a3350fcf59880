package hostcheck

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints r for an operator: the checks grouped by section, one
// line each with its fix below, then the backends, then the verdict.
func WriteText(w io.Writer, r Report) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "agent-runner doctor: kernel %s, %s, uid %d, store %s\n", orNone(r.Host.Kernel), r.Host.Arch, r.Host.UID, r.Host.StoreDir)
	for _, section := range Sections {
		fmt.Fprintf(bw, "\n%s\n", section)
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		for _, c := range r.Checks {
			if c.Section != section {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Status, c.Name, c.Found)
			if c.Fix != "" {
				fmt.Fprintf(tw, "  \t\tfix: %s\n", c.Fix)
			}
		}
		tw.Flush()
	}
	fmt.Fprintf(bw, "\nbackends\n")
	for _, b := range r.Backends {
		writeBackend(bw, b)
	}
	fmt.Fprintln(bw)
	if failed := r.Failed(); len(failed) > 0 {
		fmt.Fprintf(bw, "FAIL: %s is not ready: %s failed; each has a fix line above (exit 1)\n", r.DefaultBackend, strings.Join(failed, ", "))
	} else {
		fmt.Fprintf(bw, "OK: %s can run jobs here and enforces every required limit (%s) (exit 0)\n", r.DefaultBackend, strings.Join(RequiredLimits, ", "))
	}
	return bw.Flush()
}

func writeBackend(w io.Writer, b BackendReport) {
	var traits []string
	if b.Default {
		traits = append(traits, "default")
	}
	if b.Isolating {
		traits = append(traits, "isolating")
	} else {
		traits = append(traits, "not isolating")
	}
	if b.Available {
		traits = append(traits, "available")
	} else {
		traits = append(traits, "unavailable: "+b.Error)
	}
	fmt.Fprintf(w, "  %-4s  %s (%s)\n", b.Status, b.Kind, strings.Join(traits, ", "))
	if len(b.Enforced) > 0 {
		fmt.Fprintf(w, "        enforced: %s\n", strings.Join(b.Enforced, ", "))
	} else {
		fmt.Fprintf(w, "        enforced: nothing\n")
	}
	switch {
	case !b.Available:
		fmt.Fprintf(w, "        not enforced: all limits (the backend is unavailable)\n")
	case len(b.NotEnforced) == 0:
		fmt.Fprintf(w, "        not enforced: nothing\n")
	default:
		for _, g := range groupByWhy(b.NotEnforced) {
			fmt.Fprintf(w, "        not enforced: %s: %s\n", strings.Join(g.limits, ", "), g.why)
		}
	}
	if b.Fix != "" {
		fmt.Fprintf(w, "        fix: %s\n", b.Fix)
	}
}

// reason is the limits that share one why.
type reason struct {
	why    string
	limits []string
}

// groupByWhy groups limits by their reason, in order of first appearance.
func groupByWhy(ns []NotEnforced) []reason {
	var out []reason
	for _, n := range ns {
		i := 0
		for i < len(out) && out[i].why != n.Why {
			i++
		}
		if i == len(out) {
			out = append(out, reason{why: n.Why})
		}
		out[i].limits = append(out[i].limits, n.Limit)
	}
	return out
}
