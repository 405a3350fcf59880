package policy

import (
	"path/filepath"
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

// shellIn reports whether argv runs a shell, directly or through wrappers,
// and names the shell it found.
func shellIn(argv []string) (string, bool) {
	for depth := 0; len(argv) > 0 && depth < 8; depth++ {
		base := filepath.Base(argv[0])
		if shells[base] || alwaysShell[base] {
			return base, true
		}
		skip, isWrapper := wrappers[base]
		if !isWrapper {
			return "", false
		}
		// env -S / --split-string re-splits a string into argv: treat any
		// shell name inside it as a shell.
		for _, a := range argv[1:] {
			for _, word := range strings.Fields(a) {
				if shells[filepath.Base(word)] {
					return filepath.Base(word), true
				}
			}
		}
		argv = wrapped(base, argv[1:], skip)
	}
	return "", false
}

// wrapped returns the argv a wrapper would exec.
func wrapped(wrapper string, args []string, skip int) []string {
	i := 0
	for i < len(args) {
		a := args[i]
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
			i++
		default:
			goto operands
		}
	}
operands:
	i += skip
	if i >= len(args) {
		return nil
	}
	return args[i:]
}

// WrappedCommands returns every program argv would exec, outermost first
// (["timeout", "10", "pytest"] -> ["timeout", "pytest"]).
func WrappedCommands(argv []string) []string {
	var out []string
	for depth := 0; len(argv) > 0 && depth < 8; depth++ {
		base := filepath.Base(argv[0])
		out = append(out, argv[0])
		skip, isWrapper := wrappers[base]
		if !isWrapper {
			break
		}
		argv = wrapped(base, argv[1:], skip)
	}
	return out
}
