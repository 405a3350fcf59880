package policy

import (
	"path/filepath"
	"slices"
	"strings"
)

// shells are interpreters that run a command string.
var shells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true,
	"pdksh": true, "ash": true, "fish": true, "csh": true, "tcsh": true, "rbash": true,
	"pwsh": true, "yash": true, "posh": true, "elvish": true, "nu": true, "xonsh": true,
}

// alwaysShell are programs that always hand their arguments to a shell.
var alwaysShell = map[string]bool{"watch": true, "script": true, "su": true, "sudo": true, "doas": true, "runuser": true}

// wrappers exec another program named in their arguments. The value is the
// number of leading non-option operands the wrapper consumes before the
// wrapped command (timeout DURATION CMD, flock FILE CMD, taskset MASK CMD).
var wrappers = map[string]int{
	"env": 0, "xargs": 0, "nice": 0, "nohup": 0, "stdbuf": 0, "setsid": 0,
	"ionice": 0, "time": 0, "timeout": 1, "chrt": 1, "taskset": 1, "flock": 1,
	"unshare": 0, "chroot": 1, "nsenter": 0, "busybox": 0, "exec": 0,
	"command": 0, "builtin": 0, "setpriv": 0, "prlimit": 0, "cgexec": 0,
	"firejail": 0, "strace": 0, "ltrace": 0, "catchsegv": 0, "faketime": 1,
	"torsocks": 0, "proxychains": 0, "proxychains4": 0, "sg": 1, "newgrp": 0,
}

// optionsWithValue are wrapper flags that take a separate value argument.
var optionsWithValue = map[string]bool{
	"-n": true, "-u": true, "-C": true, "-S": true, "-s": true, "-i": true, "-o": true,
	"-e": true, "-k": true, "-a": true, "-d": true, "-I": true, "-L": true, "-P": true,
	"-E": true, "-c": true, "-p": true, "-g": true, "--signal": true, "--kill-after": true,
	"--chdir": true, "--unset": true, "--split-string": true, "--adjustment": true,
	"--max-args": true, "--max-procs": true, "--replace": true, "--delimiter": true,
	"--arg-file": true, "--class": true, "--classdata": true, "--input": true,
	"--output": true, "--error": true, "--user": true, "--group": true,
}

// IsShell reports whether name (a basename) is a shell interpreter.
func IsShell(name string) bool { return shells[name] }

// ShellPrograms are the program names a policy without allow_shell keeps
// every process of a job from executing: the shells, and busybox, whose
// sh applet any caller can name. Sorted.
func ShellPrograms() []string {
	out := []string{"busybox"}
	for s := range shells {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// maxChain bounds how many wrappers deep a command line is followed; a
// deeper chain is refused rather than partly checked.
const maxChain = 32

// tooDeep names the step that stands for a wrapper chain past maxChain. No
// allowlist entry can match it, so such a command line is denied.
const tooDeep = "(wrapper chain too deep)"

// unexpanded names the program of an env -S string that expands
// variables; no allowlist entry can match it.
const unexpanded = "(env -S string with ${} expansion)"

// step is one program a command line execs: argv[0], then every program a
// wrapper would exec in turn.
type step struct {
	name string
	// index is the position of name in the original argv, or -1 when it
	// comes from a string a wrapper re-splits (env -S).
	index int
	// assigns are NAME=VALUE operands an env wrapper puts in the
	// environment of the program it execs.
	assigns []string
	// applet is set when name is an operand that the previous wrapper
	// interprets itself (busybox APPLET) rather than looks up on PATH.
	applet bool
}

// chain returns every program argv would exec, outermost first.
func chain(argv []string) []step {
	var steps []step
	offset := 0 // index of argv[0] in the original argv, -1 once re-split
	applet := false
	for len(argv) > 0 {
		if len(steps) == maxChain {
			return append(steps, step{name: tooDeep, index: -1})
		}
		base := filepath.Base(argv[0])
		st := step{name: argv[0], index: offset, applet: applet}
		skip, isWrapper := wrappers[base]
		if !isWrapper {
			return append(steps, st)
		}
		w := wrapped(base, argv[1:], skip)
		st.assigns = w.assigns
		steps = append(steps, st)
		if w.split || offset < 0 {
			offset = -1
		} else {
			offset += 1 + w.consumed
		}
		applet = base == "busybox" || base == "command" || base == "builtin" || base == "exec"
		argv = w.argv
	}
	return steps
}

// shellIn reports whether argv runs a shell, directly or through wrappers,
// and names the shell it found.
func shellIn(argv []string) (string, bool) {
	for _, st := range chain(argv) {
		base := filepath.Base(st.name)
		if shells[base] || alwaysShell[base] {
			return base, true
		}
	}
	// Any shell name in a wrapper's arguments counts: wrappers such as
	// env -S or xargs can re-split strings into a command line.
	if _, isWrapper := wrappers[filepath.Base(argv[0])]; isWrapper {
		for _, a := range argv[1:] {
			for _, word := range strings.Fields(unquote.Replace(a)) {
				if shells[filepath.Base(word)] {
					return filepath.Base(word), true
				}
			}
		}
	}
	return "", false
}

// unquote drops the quoting env -S and xargs understand, so that 'sh' and
// "sh" are seen as sh.
var unquote = strings.NewReplacer(`'`, "", `"`, "", `\`, "")

// wrappedArgv is what a wrapper would exec.
type wrappedArgv struct {
	argv []string
	// consumed is how many of the wrapper's arguments precede argv
	// (meaningless when split is set).
	consumed int
	// split is set when argv comes from re-splitting an argument
	// (env -S STRING / --split-string=STRING).
	split   bool
	assigns []string
}

// wrapped returns the argv a wrapper would exec.
func wrapped(wrapper string, args []string, skip int) wrappedArgv {
	var w wrappedArgv
	i := 0
	for i < len(args) {
		a := args[i]
		if wrapper == "env" {
			if s, ok := splitString(args, i); ok {
				if strings.Contains(s, "$") {
					// env -S expands ${NAME}: what runs cannot be known here.
					w.argv, w.split = []string{unexpanded}, true
					return w
				}
				w.argv = append(strings.Fields(unquote.Replace(s)), args[i+splitWidth(a):]...)
				w.split = true
				return w
			}
		}
		switch {
		case a == "--":
			i++
			goto operands
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if optionsWithValue[a] {
				i++
			}
			i++
		case wrapper == "env" && strings.Contains(a, "="):
			w.assigns = append(w.assigns, a)
			i++
		default:
			goto operands
		}
	}
operands:
	i += skip
	if i >= len(args) {
		return w
	}
	w.argv, w.consumed = args[i:], i
	return w
}

// splitString returns the STRING of an env -S STRING, -SSTRING or
// --split-string[=]STRING option at args[i].
func splitString(args []string, i int) (string, bool) {
	a := args[i]
	switch {
	case a == "-S" || a == "--split-string":
		if i+1 < len(args) {
			return args[i+1], true
		}
		return "", true
	case strings.HasPrefix(a, "--split-string="):
		return strings.TrimPrefix(a, "--split-string="), true
	case strings.HasPrefix(a, "-S"):
		return a[2:], true
	}
	return "", false
}

// splitWidth is how many arguments an env split-string option occupies.
func splitWidth(a string) int {
	if a == "-S" || a == "--split-string" {
		return 2
	}
	return 1
}

// WrappedCommands returns every program argv would exec, outermost first
// (["timeout", "10", "pytest"] -> ["timeout", "pytest"]).
func WrappedCommands(argv []string) []string {
	var out []string
	for _, st := range chain(argv) {
		out = append(out, st.name)
	}
	return out
}
