package buildcache

import "os"

// TrimLater trims cache name of namespace ns in the background (Trim),
// reporting to Options.Report. While a trim of it runs, further calls ask
// for one more pass after it instead of starting another. At most two
// trims and removals run at once.
func (c *Caches) TrimLater(ns, name string) {
	key := ns + "/" + name
	c.mu.Lock()
	if _, running := c.trimming[key]; running {
		c.trimming[key] = true
		c.mu.Unlock()
		return
	}
	c.trimming[key] = false
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		for {
			c.sem <- struct{}{}
			t, err := c.Trim(ns, name)
			<-c.sem
			if c.opts.Report != nil {
				c.opts.Report(ns, name, t, err)
			}
			c.mu.Lock()
			again := c.trimming[key]
			if !again {
				delete(c.trimming, key)
				c.mu.Unlock()
				return
			}
			c.trimming[key] = false
			c.mu.Unlock()
		}
	}()
}

// removeLater removes the tree at p in the background.
func (c *Caches) removeLater(p string) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sem <- struct{}{}
		c.removeNow(p)
		<-c.sem
	}()
}

// removeNow removes the tree at p. os.RemoveAll works from directory
// descriptors (openat with O_NOFOLLOW, unlinkat) and follows no symlink.
// A tree that cannot be removed is reported and left in the trash, where
// the next Open tries again.
func (c *Caches) removeNow(p string) {
	if err := os.RemoveAll(p); err != nil && c.opts.Report != nil {
		c.opts.Report("", p, Trimmed{}, err)
	}
}

// Wait waits for the background trims and removals started so far (a
// process that is about to exit, tests).
func (c *Caches) Wait() { c.wg.Wait() }
