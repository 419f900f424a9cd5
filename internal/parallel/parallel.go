// Package parallel runs independent steps on several goroutines: a large render on every core
// (Each), and a controller's writes in batches that grow while the API server takes them
// (SlowStart). Results land at their input's index, so the outcome never depends on scheduling.
package parallel

import (
	"runtime"
	"sync"
)

// minPerWorker keeps small inputs on one goroutine, where fanning out costs more than it saves.
const minPerWorker = 64

// Each calls fn(i) for every i in [0, n) on up to GOMAXPROCS goroutines and returns when all are
// done. fn must only write state owned by index i.
func Each(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/minPerWorker))
	if workers == 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	next := make(chan int, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// SlowStart calls fn(i) for every i in [0, n) in batches of 1, 2, 4, … run at once, each batch
// after the previous one has succeeded, and returns the first error of the first batch that
// fails (the later ones are not started): a failing API server sees one request, not hundreds,
// as Kubernetes' own controllers create Pods. fn must only write state owned by index i.
func SlowStart(n int, fn func(i int) error) error {
	done := 0
	for batch := 1; done < n; batch *= 2 {
		size := min(batch, n-done)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for i := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = fn(done + i)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		done += size
	}
	return nil
}
