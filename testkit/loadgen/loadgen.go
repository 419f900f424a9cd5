// Package loadgen is the load generator of the scale benchmark: it starts N operations at a fixed
// rate, spread evenly (operation i is due at start + i/rate), on a bounded pool of workers, as
// ClusterLoader2's qpsLoad tuning set starts a test's actions. It records when each operation was
// due, when it started and when it returned, so a report can say both how the system under test
// answered and whether the generator kept its schedule at all: a rate that was not achieved shows
// as Lag, not as a quietly lower load.
package loadgen

import (
	"context"
	"fmt"
	"math"
	"time"
)

// DefaultWorkers is the pool size when Options.Workers is 0: enough concurrent calls for the rates
// the benchmark asks of one API server (a call that takes 200 ms still leaves room for 100/s),
// few enough that a saturated server shows as Lag rather than as hundreds of calls in flight.
const DefaultWorkers = 20

// maxErrors bounds Result.Errors: a report names a few failures to start from, not hundreds
// that usually share one cause.
const maxErrors = 10

// Options says how much load Run generates and how fast.
type Options struct {
	// Rate is the number of operations started per second; more than 0 and finite.
	Rate float64
	// N is the number of operations; 0 or more.
	N int
	// Workers bounds how many operations run at once, playing the part of ClusterLoader2's
	// --k8s-clients-number; 0 means DefaultWorkers. An operation due while every worker is
	// busy waits for one, and its Started shows by how much.
	Workers int
}

// validate returns the options with defaults applied, or an error naming the field at fault, so
// a benchmark's flags can be fixed from the message alone.
func (o Options) validate() (Options, error) {
	switch {
	case math.IsInf(o.Rate, 0):
		return o, fmt.Errorf("loadgen: Rate must be finite, got %v", o.Rate)
	case !(o.Rate > 0): // also NaN
		return o, fmt.Errorf("loadgen: Rate must be more than 0, got %v", o.Rate)
	case o.N < 0:
		return o, fmt.Errorf("loadgen: N must be 0 or more, got %d", o.N)
	case o.Workers < 0:
		return o, fmt.Errorf("loadgen: Workers must be 1 or more (0 for %d), got %d", DefaultWorkers, o.Workers)
	}
	// The last due time must fit a time.Duration (about 292 years); converting a larger float
	// to an integer is undefined in Go, so a tiny Rate would otherwise schedule garbage.
	if last := float64(max(o.N-1, 0)) * float64(time.Second) / o.Rate; last >= math.MaxInt64 {
		return o, fmt.Errorf("loadgen: N (%d) at Rate %v takes longer than a time.Duration holds", o.N, o.Rate)
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	return o, nil
}

// offset is when operation i is due, counted from the start. Each due time is computed from the
// start, never by adding up intervals (as upstream qpsLoad's sleep between starts does), so
// neither rounding nor late wake-ups accumulate: operation 3000 at 3/s is due at 1000 s, not
// after 3000 truncated intervals of 333333333 ns, and one late wake-up makes one operation late,
// not every one that follows.
func offset(i int, rate float64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / rate)
}

// Op is what happened to one operation.
type Op struct {
	// Scheduled is when the operation was due.
	Scheduled time.Time
	// Started is when it was handed to a free worker, which calls it at once: Scheduled, or
	// later if the dispatcher woke late or every worker was busy.
	Started time.Time
	// Done is when its call returned.
	Done time.Time
	// Err is what the call returned.
	Err error
}

// Result is what Run observed, one Op per operation started.
type Result struct {
	// Ops[i] is operation i. Operations start in order, so when ctx ended the run early Ops
	// holds the ones that started, 0 to len(Ops)-1, and none is left half-recorded.
	Ops []Op
}

// Lag is the largest Started - Scheduled over all operations: how far behind its schedule the
// generator fell. A few milliseconds is wake-up noise; more means the requested Rate was not
// achieved (the workers were all busy, or the machine was), and a report must say so rather
// than present the run as a run at Rate. 0 when no operation started.
func (r Result) Lag() time.Duration {
	var lag time.Duration
	for _, op := range r.Ops {
		lag = max(lag, op.Started.Sub(op.Scheduled))
	}
	return lag
}

// AchievedRate is the rate at which operations actually started: (n-1) / (last Started - first
// Started) over the n operations that started, the measure of the requested Rate that counts the
// intervals between starts rather than n over a wall time that includes the last call. It is 0
// when fewer than two operations started (one start has no interval), and +Inf when all started
// at the same instant.
func (r Result) AchievedRate() float64 {
	n := len(r.Ops)
	if n < 2 {
		return 0
	}
	elapsed := r.Ops[n-1].Started.Sub(r.Ops[0].Started)
	return float64(n-1) / elapsed.Seconds()
}

// Failure is one failed operation.
type Failure struct {
	// Index is the operation's i.
	Index int
	// Err is what it returned.
	Err error
}

// Errors returns the first 10 failed operations in order of their index: enough for a report to
// show what went wrong; Failed counts them all.
func (r Result) Errors() []Failure {
	var fs []Failure
	for i, op := range r.Ops {
		if op.Err == nil {
			continue
		}
		if len(fs) == maxErrors {
			break
		}
		fs = append(fs, Failure{Index: i, Err: op.Err})
	}
	return fs
}

// Failed is the number of operations that returned an error.
func (r Result) Failed() int {
	n := 0
	for _, op := range r.Ops {
		if op.Err != nil {
			n++
		}
	}
	return n
}

// clock is the time Run reads and waits on; tests give it a fake one to check the schedule
// without waiting for it.
type clock struct {
	now func() time.Time
	// sleepUntil returns when t has come or ctx has ended, with ctx.Err() in the second case.
	sleepUntil func(ctx context.Context, t time.Time) error
}

var realClock = clock{
	now: time.Now,
	sleepUntil: func(ctx context.Context, t time.Time) error {
		d := time.Until(t)
		if d <= 0 {
			return ctx.Err()
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	},
}

// Run calls op(ctx, i) for every i in [0, N), operation i due at start + i/Rate, on at most
// Workers goroutines, and returns when every operation it started has returned.
//
// An operation's error does not stop the run: a benchmark reports failures, it does not hide the
// rest of the run behind the first one; they are in the Result and Run returns nil. When ctx ends,
// Run starts no further operation and returns the Result so far with ctx's error wrapped; those
// already started finish, with ctx (so they see it has ended) as theirs.
func Run(ctx context.Context, opts Options, op func(ctx context.Context, i int) error) (Result, error) {
	return run(ctx, opts, realClock, op)
}

func run(ctx context.Context, opts Options, clk clock, op func(ctx context.Context, i int) error) (Result, error) {
	opts, err := opts.validate()
	if err != nil {
		return Result{}, err
	}
	ops := make([]Op, opts.N)

	// Each worker offers its own channel on idle when it is free; the dispatcher takes one,
	// hands it an index and so knows the call begins now. Unlike upstream qpsLoad, which starts a
	// goroutine per action, a busy pool makes the next operation wait, which Started records.
	workers := min(opts.Workers, opts.N) // no goroutine that could never get an operation
	idle := make(chan chan int, workers)
	for range workers {
		go func() {
			mine := make(chan int)
			for {
				idle <- mine
				i, ok := <-mine
				if !ok {
					return
				}
				ops[i].Err = op(ctx, i)
				ops[i].Done = clk.now()
			}
		}()
	}

	// The single dispatcher: wait until operation i is due, then for a free worker. ctx is
	// checked again once a worker is in hand, so no operation starts after ctx has ended, even
	// when a worker came free at the same moment.
	start := clk.now()
	started := 0
	for i := range opts.N {
		due := start.Add(offset(i, opts.Rate))
		if clk.sleepUntil(ctx, due) != nil {
			break
		}
		var w chan int
		select {
		case w = <-idle:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			if w != nil {
				idle <- w
			}
			break
		}
		ops[i].Scheduled, ops[i].Started = due, clk.now()
		w <- i
		started++
	}

	// Every worker comes back to idle once its last call has returned; closing its channel
	// then ends it. The writes to ops happen before, so reading them below needs no lock.
	for range workers {
		close(<-idle)
	}
	res := Result{Ops: ops[:started]}
	if started < opts.N {
		return res, fmt.Errorf("loadgen: stopped after starting %d of %d operations: %w", started, opts.N, ctx.Err())
	}
	return res, nil
}
