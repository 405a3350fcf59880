package main

import (
	"encoding/json"
	"os"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/hostcheck"
)

// newDoctorCmd is `agent-runner doctor` (package hostcheck does the
// probing; main hooks its overlay child). It exits 0 when every
// requirement of the default backend is met (no check failed), 1
// otherwise, and 2 on a usage error.
func newDoctorCmd() *cobra.Command {
	var storeDir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what this host lets agent-runner enforce, and how to fix what it cannot",
		Long: "doctor probes user namespaces, Landlock, seccomp, cgroups, overlayfs, devices, the store\n" +
			"and every backend, and prints what each backend will enforce here. Every check that is\n" +
			"not ok has a fix line. Exit 0 when the default backend (" + isolatingDefault + ") can run jobs\n" +
			"and enforce every required limit, 1 otherwise.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var bs []backend.Backend
			for _, kind := range backend.Kinds() {
				b, _ := backend.Lookup(kind)
				bs = append(bs, b)
			}
			r := hostcheck.Run(cmd.Context(), hostcheck.Local(), hostcheck.Options{
				StoreDir: storeDir, Backends: bs, DefaultBackend: isolatingDefault, ProbeTimeout: probeTimeout,
			})
			var err error
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				err = enc.Encode(r)
			} else {
				err = hostcheck.WriteText(os.Stdout, r)
			}
			if err != nil {
				return err
			}
			if !r.OK {
				return silentExit(exitOperational)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&storeDir, "store-dir", "./agent-runner-runs", "run store directory to check (serve's default)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (schema in docs/operations.md)")
	return cmd
}
