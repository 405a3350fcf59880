// Package procself parses what the kernel says about a process's mounts
// and cgroups: the mountinfo format of proc(5) and /proc/<pid>/cgroup. The
// sandbox's cgroup code, agent-runner doctor and the task disk quota read
// the same files; this is their one parser.
package procself

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file:
// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER.
type Mount struct {
	Root   string   // the mounted subtree of the filesystem
	Point  string   // where it is mounted
	Opts   []string // per-mount options (ro, nosuid, ...)
	FSType string
	Source string
	Super  []string // filesystem options (cgroup v1: its controllers)
}

// ReadOnly reports whether the mount is read-only.
func (m Mount) ReadOnly() bool { return slices.Contains(m.Opts, "ro") }

// Mounts parses a mountinfo file; malformed lines are skipped.
func Mounts(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		out = append(out, Mount{
			Root:   Unescape(f[3]),
			Point:  Unescape(f[4]),
			Opts:   strings.Split(f[5], ","),
			FSType: f[sep+1],
			Source: Unescape(f[sep+2]),
			Super:  strings.Split(f[sep+3], ","),
		})
	}
	return out, sc.Err()
}

// Unescape undoes the kernel's octal escapes in mountinfo fields (\040
// for a space, \011 tab, \012 newline, \134 backslash).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Cgroups parses a /proc/<pid>/cgroup file: each cgroup v1 controller
// maps to its path, and the unified (v2) hierarchy's "0::path" line to
// the key "".
func Cgroups(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				out[c] = parts[2]
			}
		}
	}
	return out, sc.Err()
}
