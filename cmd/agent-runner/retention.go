package main

import (
	"context"
	"log/slog"
	"time"
)

// retention is one kind of record's part in serve's retention: each is
// the store's retention (store.Records.Retain) for its kind, which
// removes terminal records past their age and never one in progress.
type retention struct {
	kind   string
	retain func(now time.Time) ([]string, error)
}

// retainEvery runs every kind's retention now and then every interval
// until ctx ends, logging what each removed: one schedule for job runs
// (and unused overlay layers), agent tasks and capability runs.
func retainEvery(ctx context.Context, interval time.Duration, log *slog.Logger, kinds ...retention) {
	t := time.NewTicker(interval)
	defer t.Stop()
	now := time.Now()
	for {
		for _, k := range kinds {
			removed, err := k.retain(now)
			if err != nil {
				log.Warn("retention failed", "kind", k.kind, "error", err)
			}
			if len(removed) > 0 {
				log.Info("retention removed expired records", "kind", k.kind, "removed", removed)
			}
		}
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
	}
}
