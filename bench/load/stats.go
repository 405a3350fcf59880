package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"time"
)

// summary is one measured level: n operations at a concurrency, their rate
// and submit-to-terminal latencies.
type summary struct {
	Concurrency   int
	N             int
	Rate          float64 // operations per second of wall time
	Mean          time.Duration
	P50, P95, P99 time.Duration
	Max           time.Duration
}

// sample is the latency of each of n operations run at a concurrency, and
// the wall time they took together.
type sample struct {
	Concurrency int
	Lat         []time.Duration
	Elapsed     time.Duration
}

// add appends o's operations and wall time to s (rounds of one level).
func (s *sample) add(o sample) {
	s.Concurrency = o.Concurrency
	s.Lat = append(s.Lat, o.Lat...)
	s.Elapsed += o.Elapsed
}

func (s sample) summary() summary {
	return summarize(s.Concurrency, append([]time.Duration(nil), s.Lat...), s.Elapsed)
}

// measure runs one for i in [0, n) on conc goroutines and records the
// latency of each call. The first error stops the level and is returned.
func measure(conc, n int, one func(i int) error) (sample, error) {
	lat := make([]time.Duration, n)
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for w := 0; w < min(conc, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t := time.Now()
				if err := one(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	for i := 0; i < n; i++ {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return sample{}, firstErr
	}
	return sample{Concurrency: conc, Lat: lat, Elapsed: time.Since(start)}, nil
}

// summarize sorts lat in place.
func summarize(conc int, lat []time.Duration, elapsed time.Duration) summary {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	s := summary{Concurrency: conc, N: len(lat), P50: percentile(lat, 50), P95: percentile(lat, 95), P99: percentile(lat, 99)}
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
		s.Mean = sum / time.Duration(len(lat))
		s.Rate = float64(len(lat)) / elapsed.Seconds()
	}
	return s
}

// percentile is the nearest-rank p-th percentile of sorted: the smallest
// value that at least p% of the values do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

const tableHeader = "%-12s %6s %10s %10s %10s %10s %10s %10s\n"

func printHeader(w io.Writer, unit string) {
	fmt.Fprintf(w, tableHeader, "concurrency", "n", unit+"/s", "mean", "p50", "p95", "p99", "max")
}

func printRow(w io.Writer, s summary) {
	fmt.Fprintf(w, "%-12d %6d %10.1f %10s %10s %10s %10s %10s\n", s.Concurrency, s.N, s.Rate, ms(s.Mean), ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
