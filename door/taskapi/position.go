package taskapi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// position is where a viewer of a task's stream stands in the task's
// records (outbox/progress): the bytes of events.jsonl, stdout.log,
// stderr.log and the heartbeats it was sent, how many messages of the
// heartbeat line that starts at beats it was sent (a line may make a
// progress and a metrics message), and whether it was sent the final
// error. Its text, "<events>.<stdout>.<stderr>.<beats>.<sent>.<final>",
// is every stream message's id, so a viewer that reconnects after a
// message resumes right after it: no gap, no repeat.
type position struct {
	events, stdout, stderr, beats int64
	beatSent                      int
	final                         bool
}

func (p position) String() string {
	f := 0
	if p.final {
		f = 1
	}
	return fmt.Sprintf("%d.%d.%d.%d.%d.%d", p.events, p.stdout, p.stderr, p.beats, p.beatSent, f)
}

// parsePosition reads a stream message's id; "" is the start.
func parsePosition(v string) (position, error) {
	var p position
	if v == "" {
		return p, nil
	}
	parts := strings.Split(v, ".")
	var n [6]int64
	ok := len(parts) == len(n)
	for i := 0; ok && i < len(n); i++ {
		var err error
		n[i], err = strconv.ParseInt(parts[i], 10, 64)
		ok = err == nil && n[i] >= 0
	}
	if !ok || n[4] > 2 || n[5] > 1 {
		return p, job.Errorf(job.CodeInvalidRequest, "%q is not an event id of this stream (<events>.<stdout>.<stderr>.<heartbeats>.<sent>.<final>)", v)
	}
	return position{events: n[0], stdout: n[1], stderr: n[2], beats: n[3], beatSent: int(n[4]), final: n[5] == 1}, nil
}
