package hostcheck

import (
	"bufio"
	"path"
	"slices"
	"strconv"
	"strings"
)

// mount is one line of /proc/self/mountinfo.
type mount struct {
	root   string   // the mounted subtree of the filesystem
	point  string   // where it is mounted
	opts   []string // per-mount options (ro, nosuid, ...)
	fstype string
	super  []string // filesystem options (cgroup v1: its controllers)
}

// readOnly reports whether the mount is read-only.
func (m mount) readOnly() bool { return slices.Contains(m.opts, "ro") }

// parseMountinfo parses the format of proc(5): ID PARENT MAJ:MIN ROOT
// POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER.
func parseMountinfo(s string) []mount {
	var out []mount
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		out = append(out, mount{
			root:   unescapeOctal(f[3]),
			point:  unescapeOctal(f[4]),
			opts:   strings.Split(f[5], ","),
			fstype: f[sep+1],
			super:  strings.Split(f[sep+3], ","),
		})
	}
	return out
}

// unescapeOctal undoes the \040-style escapes of mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
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

// ownCgroups parses /proc/self/cgroup: v1 controller -> path, and the v2
// path under the key "".
func ownCgroups(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, ":", 3)
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
	return out
}

// under is the directory of cgroup path p (as /proc/self/cgroup names it)
// in a mount of its hierarchy whose root may be a subtree; ok is false when
// p lies outside that subtree.
func under(m mount, p string) (string, bool) {
	if m.root == "/" {
		return path.Join(m.point, p), true
	}
	if p != m.root && !strings.HasPrefix(p, m.root+"/") {
		return "", false
	}
	return path.Join(m.point, strings.TrimPrefix(p, m.root)), true
}
