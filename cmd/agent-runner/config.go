package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// addConfigFlag gives root, and so every subcommand, --config FILE: the
// operator's configuration file, a YAML map from a command's long flag
// names to values, for settings that are tedious on a command line (the
// sandbox view, the egress ceiling, workspace roots):
//
//	sandbox-ro: [/opt/tools, /usr/local/lib/node_modules]
//	egress-allow: [api.anthropic.com, registry.npmjs.org]
//	secrets-file: /etc/agent-runner/secrets.yaml
//
// A flag given on the command line wins over the file; a list sets a
// repeatable flag once per element. A key that is not a flag of the
// command is an error, so a typo never passes silently.
func addConfigFlag(root *cobra.Command) {
	root.PersistentFlags().String("config", "", "YAML file of flag values (long flag names as keys; command-line flags win)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		path, _ := cmd.Flags().GetString("config")
		if path == "" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return usageError{fmt.Errorf("--config: %w", err)}
		}
		return applyConfig(cmd.Flags(), data, path)
	}
}

// applyConfig sets the flags of fs named in data that were not given on
// the command line.
func applyConfig(fs *pflag.FlagSet, data []byte, path string) error {
	var doc map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return usageError{fmt.Errorf("--config %s: not a YAML map of flag names: %w", path, err)}
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range keys {
		f := fs.Lookup(name)
		if f == nil || name == "config" || name == "help" {
			return usageError{fmt.Errorf("--config %s: %q is not a flag of this command", path, name)}
		}
		if f.Changed {
			continue
		}
		values, isList := doc[name].([]any)
		if !isList {
			values = []any{doc[name]}
		} else if _, repeatable := f.Value.(pflag.SliceValue); !repeatable {
			return usageError{fmt.Errorf("--config %s: %s takes one value, not a list", path, name)}
		}
		for _, v := range values {
			if v == nil {
				return usageError{fmt.Errorf("--config %s: %s has no value", path, name)}
			}
			if err := fs.Set(name, fmt.Sprint(v)); err != nil {
				return usageError{fmt.Errorf("--config %s: %s: %w", path, name, err)}
			}
		}
	}
	return nil
}
