package egress

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// maxSummaryKeys bounds the (host, reason) pairs counted apart between two
// summaries; refusals of further hosts are counted under host "*", by
// reason. A summary round is thus at most maxSummaryKeys plus one per
// reason code records.
const maxSummaryKeys = 32

// otherHosts is the Host of a summary of the hosts past maxSummaryKeys.
const otherHosts = "*"

// Log attribute keys of the refusal lines.
const (
	logKeyUnlogged   = "unlogged"   // refusals not logged since the previous line
	logKeyRefused    = "refused"    // refusals of the run, all told
	logKeyRecorded   = "recorded"   // of those, recorded one by one
	logKeySummarized = "summarized" // of those, counted into summaries
)

// refusalKey groups refusals for counting.
type refusalKey struct{ host, reason string }

// tally counts the refusals of one key since the last summary.
type tally struct {
	count       int64
	first, last time.Time
	port        int // the refusals' port, 0 when they differ
}

// refusals decides, for one run, which refusals are recorded one by one
// and which are counted into summaries, and which are logged: a refusal
// is a connection the workload opens at will, so neither the records, the
// events made of them, nor the log may grow with their number.
type refusals struct {
	perKey, max int
	logEvery    time.Duration

	mu       sync.Mutex
	recorded int                   // recorded one by one
	byKey    map[refusalKey]int    // recorded one by one, per key
	pending  map[refusalKey]*tally // counted since the last summary
	total    int64                 // refusals of the run
	counted  int64                 // counted into summaries
	lastLog  time.Time
	unlogged int64 // not logged since the last line
}

func newRefusals(perKey, max int, logEvery time.Duration) *refusals {
	return &refusals{perKey: perKey, max: max, logEvery: logEvery, byKey: map[refusalKey]int{}, pending: map[refusalKey]*tally{}}
}

// note takes a refused Decision: record says it is to be recorded one by
// one (otherwise it was counted for a summary), log that it is to be
// logged, with unlogged the refusals not logged since the previous line.
func (r *refusals) note(d Decision, now time.Time) (record, log bool, unlogged int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	if r.lastLog.IsZero() || now.Sub(r.lastLog) >= r.logEvery {
		log, unlogged = true, r.unlogged
		r.lastLog, r.unlogged = now, 0
	} else {
		r.unlogged++
	}
	key := refusalKey{host: d.Host, reason: d.Rule}
	if r.recorded < r.max && r.byKey[key] < r.perKey {
		r.recorded++
		r.byKey[key]++
		return true, log, unlogged
	}
	r.counted++
	if _, ok := r.pending[key]; !ok && len(r.pending) >= maxSummaryKeys {
		key.host = otherHosts
	}
	t := r.pending[key]
	if t == nil {
		t = &tally{first: d.Time, last: d.Time, port: d.Port}
		r.pending[key] = t
	}
	t.count++
	if d.Time.Before(t.first) {
		t.first = d.Time
	}
	if d.Time.After(t.last) {
		t.last = d.Time
	}
	if t.port != d.Port {
		t.port = 0
	}
	return false, log, unlogged
}

// summaries returns the refusals counted since the last call as summary
// Decisions, ordered by host and reason.
func (r *refusals) summaries(run string) []Decision {
	r.mu.Lock()
	pending := r.pending
	r.pending = map[refusalKey]*tally{}
	r.mu.Unlock()
	out := make([]Decision, 0, len(pending))
	for k, t := range pending {
		what := "refusals"
		if t.count == 1 {
			what = "refusal"
		}
		detail := fmt.Sprintf("%d %s of this host for %s not recorded one by one", t.count, what, k.reason)
		if k.host == otherHosts {
			detail = fmt.Sprintf("%d %s of other hosts for %s not recorded one by one", t.count, what, k.reason)
		}
		out = append(out, Decision{Time: t.first, Last: t.last, Run: run, Host: k.host, Port: t.port,
			Mode: ModeSummary, Rule: k.reason, Error: detail, Count: t.count})
	}
	slices.SortFunc(out, func(a, b Decision) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Rule, b.Rule))
	})
	return out
}

// summarize hands the summaries of the refusals counted since the last
// round to the audit sink.
func (s *session) summarize() {
	for _, d := range s.refusals.summaries(s.run.ID) {
		if s.run.Audit != nil {
			s.run.Audit(d)
		}
	}
}

// summarizeEvery writes summaries every interval until the returned stop
// is called; stop returns once the last round has ended.
func (s *session) summarizeEvery(interval time.Duration) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.summarize()
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// finishRefusals ends a run: the last summaries, then, when some
// refusals were not logged or not recorded one by one, one log line with
// the run's counts.
func (s *session) finishRefusals() {
	s.summarize()
	r := s.refusals
	r.mu.Lock()
	total, recorded, counted, unlogged := r.total, r.recorded, r.counted, r.unlogged
	r.unlogged = 0
	r.mu.Unlock()
	if unlogged == 0 && counted == 0 {
		return
	}
	s.g.log.LogAttrs(s.ctx, slog.LevelInfo, "egress refusals of the run",
		slog.String(logKeyRun, s.run.ID), slog.Int64(logKeyRefused, total), slog.Int(logKeyRecorded, recorded),
		slog.Int64(logKeySummarized, counted), slog.Int64(logKeyUnlogged, unlogged))
}
