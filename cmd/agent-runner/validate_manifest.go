package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/agent/manifest"
)

// printCompiledManifest loads and compiles an agent manifest (relative
// roots against the working directory) and prints the policy.
func printCompiledManifest(cmd *cobra.Command, path string, asJSON bool) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	_, p, _, err := manifest.LoadPolicy(path, wd)
	if err != nil {
		return err
	}
	if asJSON {
		return writeResult("", p)
	}
	w := cmd.OutOrStdout()
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "(none)"
		}
		return strings.Join(xs, ", ")
	}
	fmt.Fprintf(w, "agent: %s\ntools: %s\nread roots: %s\nwrite roots: %s\n", p.Name, list(p.Tools), list(p.ReadRoots), list(p.WriteRoots))
	fmt.Fprintln(w, "commands:")
	for _, c := range p.Commands {
		digest := c.SHA256
		if digest == "" {
			digest = "(not pinned: missing at compile time)"
		}
		fmt.Fprintf(w, "  %s sha256:%s\n", c.Path, digest)
	}
	fmt.Fprintf(w, "network: %v\ngit: %v\n", p.Network, p.Git)
	fmt.Fprintf(w, "limits: max_runtime_seconds=%d max_memory_mb=%d max_tool_calls=%d",
		p.Limits.MaxRuntimeSeconds, p.Limits.MaxMemoryMB, p.Limits.MaxToolCalls)
	if len(p.Limits.Defaulted) > 0 {
		fmt.Fprintf(w, " (defaulted: %s)", strings.Join(p.Limits.Defaulted, ", "))
	}
	fmt.Fprintln(w)
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}
