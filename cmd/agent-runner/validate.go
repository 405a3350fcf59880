package main

import (
	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/docs/schemas"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// newValidateCmd is `agent-runner validate`: a request here, an agent
// manifest in validate_manifest.go.
func newValidateCmd() *cobra.Command {
	var requestPath, manifestPath, storeDir string // --store-dir is accepted and unused: validate opens no store
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate (--request FILE|- | --manifest FILE)",
		Short: "Validate a RunJobRequest (schema and runner rules) or an agent manifest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case manifestPath != "":
				return printCompiledManifest(cmd, manifestPath, asJSON)
			case requestPath == "":
				return usageError{errString("one of --request or --manifest is required")}
			}
			data, err := readInput(requestPath)
			if err != nil {
				return err
			}
			if err := schemas.ValidateRequest(data); err != nil {
				return job.Errorf(job.CodeInvalidRequest, "request does not match the RunJobRequest schema: %v", err)
			}
			req, err := job.DecodeRequest(data)
			if err != nil {
				return err
			}
			// Checked against the runner's rules; no store is opened.
			if err := runner.Validate(runner.Config{}, req); err != nil {
				return err
			}
			return writeResult("", map[string]any{"valid": true, "request": req})
		},
	}
	cmd.Flags().StringVar(&requestPath, "request", "", "RunJobRequest JSON file, or - for stdin")
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "agent manifest (YAML or JSON) to compile and print")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the compiled manifest policy as JSON")
	cmd.Flags().StringVar(&storeDir, "store-dir", defaultStoreDir, "ignored (validate opens no store); kept so scripts that pass it keep working")
	return cmd
}

type errString string

func (e errString) Error() string { return string(e) }
