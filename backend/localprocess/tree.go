package localprocess

import (
	"bytes"
	"os"
	"strconv"
)

// descendants returns the pids of every live descendant of pid, found by
// walking /proc. A child that left the job's process group (setsid,
// setpgid) is still a descendant as long as its ancestors live, so the
// timeout can reach it even though a group kill does not.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentOf reads the ppid from /proc/<pid>/stat ("pid (comm) state ppid
// ..."; comm may contain spaces and parentheses, so parse after the last
// ')').
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(fields[1]))
	return pp, err == nil
}
