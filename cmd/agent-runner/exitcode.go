package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/agent-runner/agent-runner/job"
)

// CLI exit codes (seed 002): 0 whenever a result was produced, including
// denials, failures and timeouts; non-zero only when no result could be.
const (
	exitOK          = 0
	exitOperational = 1 // I/O failure, unwritable --out, internal error
	exitInvalid     = 2 // usage error, unreadable or invalid request/manifest
)

// usageError marks a command-line mistake (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }

// exitCode is the one place CLI errors become exit codes. It also prints
// the error: coded errors as their stable JSON object on stderr.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var silent silentExit
	if errors.As(err, &silent) {
		return int(silent)
	}
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintln(os.Stderr, "agent-runner:", u.err)
		return exitInvalid
	}
	var jerr *job.Error
	if !errors.As(err, &jerr) {
		fmt.Fprintln(os.Stderr, "agent-runner:", err)
		if isCobraUsage(err) {
			return exitInvalid
		}
		return exitOperational
	}
	b, _ := json.Marshal(map[string]any{"error": jerr})
	fmt.Fprintln(os.Stderr, string(b))
	switch jerr.Code.Class() {
	case "validation", "policy", "image":
		// A policy refusal here kept the input from becoming a job or a
		// task (a denied job still has a result, exit 0), or is the
		// error of a sandbox exec that never started (sandbox exec); an
		// image.* error: the image named is not there, or an import was
		// refused.
		return exitInvalid
	}
	switch jerr.Code {
	case job.CodeJobNotFound, job.CodeJobConflict:
		return exitInvalid
	}
	return exitOperational
}

// silentExit is an exit status whose message was already printed.
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// isCobraUsage recognizes cobra's own argument and flag errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "required flag", "accepts ", "invalid argument", "flag needs an argument"} {
		if len(msg) >= len(p) && contains(msg, p) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
