package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// maxRequestBytes bounds a request document read by the CLI.
const maxRequestBytes = 8 << 20

// readInput reads a file, or standard input for "-".
func readInput(path string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read request file").With("path", path)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read request")
	}
	if len(b) > maxRequestBytes {
		return nil, job.Errorf(job.CodeBodyTooLarge, "request is larger than %d bytes", maxRequestBytes)
	}
	return b, nil
}

// writeResult prints v as indented JSON to stdout, or atomically to out.
func writeResult(out string, v any) error {
	b, err := job.MarshalIndent(v)
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write --out")
	}
	return store.WriteFileAtomic(abs, b, 0o644)
}
