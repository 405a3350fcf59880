package buildcache

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestJobsDoNotWaitForTheWalk: a job's release and the next job's
// acquire return while the cache's walk is held still in the background:
// neither walks the cache itself.
func TestJobsDoNotWaitForTheWalk(t *testing.T) {
	c := open(t, Options{})
	dir := c.Path(LocalNamespace, "x")
	for i := range 1000 {
		write(t, dir, fmt.Sprint(i%10, "/", i), 0, 0)
	}
	walking, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testHookWalk = func(string) { once.Do(func() { close(walking); <-resume }) }
	defer func() {
		close(resume)
		c.Wait()
		testHookWalk = nil
	}()

	done := make(chan *Lease)
	go func() {
		l := acquire(t, c, "x")
		l.Release() // starts the background trim
		done <- acquire(t, c, "x")
	}()
	<-walking
	select {
	case next := <-done:
		if next.NotMounted != "" {
			t.Errorf("next job's lease: NotMounted = %q, want the cache (measuring takes no lock)", next.NotMounted)
		}
		next.Release()
	case <-time.After(time.Minute):
		t.Fatal("a job's release or acquire waited for the cache's walk")
	}
}

// BenchmarkJobStartWith300kEntries is one job's acquire and release of
// a cache of 300,000 empty files (the finding: each job walked them as
// root, 1.3 to 4.5 s), beside an empty cache. Both stay cheap: the walk
// runs in the background. go test -bench JobStart ./buildcache
func BenchmarkJobStartWith300kEntries(b *testing.B) {
	for _, n := range []int{0, 300_000} {
		b.Run(fmt.Sprint(n, "_entries"), func(b *testing.B) {
			c, err := Open(b.TempDir(), Options{MaxInodes: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			dir := c.Path(LocalNamespace, "x")
			for i := range n {
				if i%1000 == 0 {
					os.MkdirAll(filepath.Join(dir, fmt.Sprint(i/1000)), 0o755)
				}
				f, err := os.Create(filepath.Join(dir, fmt.Sprint(i/1000), fmt.Sprint(i)))
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			for b.Loop() {
				l, err := c.Acquire(LocalNamespace, "x")
				if err != nil {
					b.Fatal(err)
				}
				l.Release()
			}
			b.StopTimer()
			c.Wait()
		})
	}
}
