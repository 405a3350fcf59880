package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/image"
	"github.com/agent-runner/agent-runner/job"
)

// imageStoreFlags are --store-dir and --images-dir, shared by the image
// commands and serve: the image store is <store-dir>/images unless
// --images-dir names another directory.
type imageStoreFlags struct {
	storeDir, imagesDir string
}

func (f *imageStoreFlags) register(fs *pflag.FlagSet, withStoreDir bool) {
	if withStoreDir {
		fs.StringVar(&f.storeDir, "store-dir", "./agent-runner-runs", "run store directory (serve's); the image store is <store-dir>/images")
	}
	fs.StringVar(&f.imagesDir, "images-dir", "", "image store directory (default <store-dir>/images)")
}

func (f imageStoreFlags) dir(storeDir string) string {
	if f.imagesDir != "" {
		return f.imagesDir
	}
	return filepath.Join(storeDir, "images")
}

func (f imageStoreFlags) open() (*image.Store, error) {
	return image.Open(image.Config{Dir: f.dir(f.storeDir)})
}

// newImageCmd is `agent-runner image` (import, ls, rm, inspect).
func newImageCmd() *cobra.Command {
	var flags imageStoreFlags
	cmd := &cobra.Command{Use: "image", Short: "Import, list, inspect and remove container images (docs/images.md)"}
	flags.register(cmd.PersistentFlags(), true)

	var tags []string
	importCmd := &cobra.Command{
		Use:   "import FILE|DIR",
		Short: "Import an OCI image layout (directory or tar) or a docker save archive; prints the images as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := flags.open()
			if err != nil {
				return err
			}
			infos, err := s.Import(context.Background(), args[0], image.ImportOptions{Tags: tags})
			if err != nil {
				return err
			}
			return printJSON(cmd, infos)
		},
	}
	importCmd.Flags().StringArrayVar(&tags, "tag", nil, "name:tag to give the image (repeatable; the archive must hold one image)")

	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the images in the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := flags.open()
			if err != nil {
				return err
			}
			infos, err := s.List()
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd, infos)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TAGS\tDIGEST\tSIZE\tIMPORTED")
			for _, i := range infos {
				tags := strings.Join(i.Tags, ",")
				if tags == "" {
					tags = "<none>"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", tags, i.Digest[:len("sha256:")+12], i.Size, i.Imported.Format("2006-01-02T15:04:05Z"))
			}
			return w.Flush()
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")

	rm := &cobra.Command{
		Use:   "rm REF",
		Short: "Untag name:tag (the image goes with its last tag) or remove a sha256: digest; unused rootfs directories are collected",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := flags.open()
			if err != nil {
				return err
			}
			digest, err := s.Remove(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s (%s)\n", args[0], digest)
			return nil
		},
	}

	inspect := &cobra.Command{
		Use:   "inspect REF",
		Short: "Print an image's digest, size, layers and config as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := flags.open()
			if err != nil {
				return err
			}
			info, err := s.Inspect(args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd, info)
		},
	}
	cmd.AddCommand(importCmd, ls, rm, inspect)
	return cmd
}

func printJSON(cmd *cobra.Command, v any) error {
	b, err := job.MarshalIndent(v)
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(b)
	return err
}
