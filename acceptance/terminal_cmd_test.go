package acceptance

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// cmdTerminal opens a terminal on the script's serve (client.OpenTerminal:
// a pty process attached over its WebSocket, Kubernetes exec framing)
// and plays a dialogue file, one step a line:
//
//	send "TEXT"      type TEXT (a Go string literal: "\x03" is Ctrl-C)
//	resize COLS ROWS send a resize frame
//	expect "TEXT"    read until what it showed since the last expect holds TEXT
//
// then waits for the process and prints everything it showed, and last
// "exit status N" (or the error's code).
//
//	terminal [-cols=N] [-rows=N] SANDBOX DIALOGUE -- ARGV...
func cmdTerminal(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("terminal", flag.ContinueOnError)
	cols := fs.Uint("cols", 80, "the terminal's columns")
	rows := fs.Uint("rows", 24, "the terminal's rows")
	ts.Check(fs.Parse(args))
	if neg || fs.NArg() < 4 || fs.Arg(2) != "--" {
		ts.Fatalf("usage: terminal [-cols=N] [-rows=N] SANDBOX DIALOGUE -- ARGV...")
	}
	// A bound on the whole dialogue, so that a shell that never answers
	// fails the script instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(ts.Getenv("AGENT_RUNNER_URL"), ts.Getenv("AGENT_RUNNER_TOKEN"))
	term, err := c.OpenTerminal(ctx, fs.Arg(0), client.ProcessRequest{Argv: fs.Args()[3:]}, client.PtySize{Cols: uint16(*cols), Rows: uint16(*rows)})
	ts.Check(err)
	defer term.Close()
	shown := make(chan []byte, 64)
	go func() {
		defer close(shown)
		b := make([]byte, 4096)
		for {
			n, err := term.Read(b)
			if n > 0 {
				shown <- append([]byte(nil), b[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	var all, since bytes.Buffer
	read := func(want string) {
		for !strings.Contains(since.String(), want) {
			select {
			case b, ok := <-shown:
				if !ok {
					ts.Fatalf("expecting %q, the process ended; it showed:\n%s", want, all.String())
				}
				all.Write(b)
				since.Write(b)
			case <-ctx.Done():
				ts.Fatalf("expecting %q; the terminal showed:\n%s", want, all.String())
			}
		}
		since.Reset()
	}
	for i, line := range strings.Split(ts.ReadFile(fs.Arg(1)), "\n") {
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "", "#":
		case "send", "expect":
			text, err := strconv.Unquote(arg)
			if err != nil {
				ts.Fatalf("%s line %d: %s wants a Go string literal: %v", fs.Arg(1), i+1, verb, err)
			}
			if verb == "expect" {
				read(text)
				continue
			}
			_, err = term.Write([]byte(text))
			ts.Check(err)
		case "resize":
			var w, h uint16
			if _, err := fmt.Sscan(arg, &w, &h); err != nil {
				ts.Fatalf("%s line %d: resize COLS ROWS: %v", fs.Arg(1), i+1, err)
			}
			ts.Check(term.Resize(w, h))
		default:
			ts.Fatalf("%s line %d: unknown step %q", fs.Arg(1), i+1, verb)
		}
	}
	for b := range shown {
		all.Write(b)
	}
	code, err := term.Wait()
	fmt.Fprint(ts.Stdout(), all.String())
	var jerr *job.Error
	switch {
	case errors.As(err, &jerr):
		fmt.Fprintf(ts.Stdout(), "\nended: %s\n", jerr.Code)
	case err != nil:
		ts.Fatalf("terminal: %v", err)
	default:
		fmt.Fprintf(ts.Stdout(), "\nexit status %d\n", code)
	}
}
