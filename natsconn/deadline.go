package natsconn

import (
	"sync"
	"time"
)

// deadline is a read or write deadline: done is closed once it passed,
// and replaced when it is moved into the future.
type deadline struct {
	mu    sync.Mutex
	timer *time.Timer
	done  chan struct{}
}

func newDeadline() *deadline { return &deadline{done: make(chan struct{})} }

// set moves the deadline to t (zero: none).
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.done // the timer fired: wait until it closed done
	}
	d.timer = nil
	passed := isClosed(d.done)
	if t.IsZero() {
		if passed {
			d.done = make(chan struct{})
		}
		return
	}
	if wait := time.Until(t); wait > 0 {
		if passed {
			d.done = make(chan struct{})
		}
		done := d.done
		d.timer = time.AfterFunc(wait, func() { close(done) })
		return
	}
	if !passed {
		close(d.done)
	}
}

// wait is closed once the deadline passed.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
