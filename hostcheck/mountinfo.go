package hostcheck

import (
	"path"
	"strings"

	"github.com/agent-runner/agent-runner/procself"
)

// mount is one line of /proc/self/mountinfo.
type mount = procself.Mount

// parseMountinfo parses a mountinfo file's contents.
func parseMountinfo(s string) []mount {
	out, _ := procself.Mounts(strings.NewReader(s))
	return out
}

// ownCgroups parses /proc/self/cgroup: v1 controller -> path, and the v2
// path under the key "".
func ownCgroups(s string) map[string]string {
	out, _ := procself.Cgroups(strings.NewReader(s))
	return out
}

// under is the directory of cgroup path p (as /proc/self/cgroup names it)
// in a mount of its hierarchy whose root may be a subtree; ok is false when
// p lies outside that subtree.
func under(m mount, p string) (string, bool) {
	if m.Root == "/" {
		return path.Join(m.Point, p), true
	}
	if p != m.Root && !strings.HasPrefix(p, m.Root+"/") {
		return "", false
	}
	return path.Join(m.Point, strings.TrimPrefix(p, m.Root)), true
}
