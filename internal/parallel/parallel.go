// Package parallel runs independent steps of a large render on every core. Results land at
// their input's index, so the outcome never depends on scheduling.
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
