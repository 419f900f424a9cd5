package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock only moves when the dispatcher sleeps until a due time or a test's operation says
// when it returns, and only forward, so the schedule a run produces does not depend on how the
// goroutines interleave.
type fakeClock struct {
	mu    sync.Mutex
	start time.Time
	t     time.Time
	// wall, if set, is a due time the dispatcher never reaches: sleeping until it (or later)
	// lasts until ctx ends, as a real sleep for a far-off operation would.
	wall time.Duration
}

func newFakeClock() *fakeClock {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &fakeClock{start: start, t: start}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// advanceTo moves the clock to start+d unless it is already past it.
func (c *fakeClock) advanceTo(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.start.Add(d); t.After(c.t) {
		c.t = t
	}
}

func (c *fakeClock) clock() clock {
	return clock{
		now: c.now,
		sleepUntil: func(ctx context.Context, t time.Time) error {
			if c.wall > 0 && !t.Before(c.start.Add(c.wall)) {
				<-ctx.Done()
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			c.advanceTo(t.Sub(c.start))
			return nil
		},
	}
}

// offsets is a run's times as offsets from the fake clock's start, which is where Run starts.
type offsets struct {
	Scheduled, Started, Done []time.Duration
}

func offsetsOf(c *fakeClock, res Result) offsets {
	var got offsets
	for _, op := range res.Ops {
		got.Scheduled = append(got.Scheduled, op.Scheduled.Sub(c.start))
		got.Started = append(got.Started, op.Started.Sub(c.start))
		got.Done = append(got.Done, op.Done.Sub(c.start))
	}
	return got
}

func ms(v ...float64) []time.Duration {
	var ds []time.Duration
	for _, f := range v {
		ds = append(ds, time.Duration(f*float64(time.Millisecond)))
	}
	return ds
}

// TestSchedule: on the fake clock, each operation is due at start + i/rate, computed from the
// start, and starts then unless it waits for a worker.
func TestSchedule(t *testing.T) {
	cases := map[string]struct {
		reason string
		opts   Options
		// returnsAt, if set, is when operation i returns (no earlier than it started). Without
		// it an operation returns at once, but the fake clock may already have moved on to the
		// next due time when its Done is read, so Done is only compared when it is set.
		returnsAt func(i int) time.Duration
		want      offsets
	}{
		"EvenlySpread": {
			reason: "operation i is due at i/rate and starts then when a worker is free",
			opts:   Options{Rate: 4, N: 4},
			want:   offsets{Scheduled: ms(0, 250, 500, 750), Started: ms(0, 250, 500, 750)},
		},
		"EachDueTimeTruncatedOnItsOwn": {
			reason: "at 75/s each due time is computed from the start: 26666666 ns, not twice 13333333",
			opts:   Options{Rate: 75, N: 4},
			want: offsets{
				Scheduled: []time.Duration{0, 13333333, 26666666, 40 * time.Millisecond},
				Started:   []time.Duration{0, 13333333, 26666666, 40 * time.Millisecond},
			},
		},
		"NoDrift": {
			reason: "at 3/s operation 3 is due at exactly 1 s, not at 3 x 333333333 ns",
			opts:   Options{Rate: 3, N: 4},
			want: offsets{
				Scheduled: []time.Duration{0, 333333333, 666666666, time.Second},
				Started:   []time.Duration{0, 333333333, 666666666, time.Second},
			},
		},
		"SlowerThanOnePerSecond": {
			reason: "a rate below 1 spaces operations by more than a second",
			opts:   Options{Rate: 0.5, N: 3},
			want:   offsets{Scheduled: ms(0, 2000, 4000), Started: ms(0, 2000, 4000)},
		},
		"One": {
			reason: "a single operation starts at once",
			opts:   Options{Rate: 10, N: 1},
			want:   offsets{Scheduled: ms(0), Started: ms(0)},
		},
		"None": {
			reason: "N 0 runs nothing",
			opts:   Options{Rate: 10, N: 0},
		},
		"SlowCallsOneWorker": {
			reason: "with one worker each 1 s call holds back the next one: the schedule is 2/s, the starts 1/s",
			opts:   Options{Rate: 2, N: 4, Workers: 1},
			returnsAt: func(i int) time.Duration {
				return time.Duration(i+1) * time.Second
			},
			want: offsets{
				Scheduled: ms(0, 500, 1000, 1500),
				Started:   ms(0, 1000, 2000, 3000),
				Done:      ms(1000, 2000, 3000, 4000),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newFakeClock()
			res, err := run(t.Context(), tc.opts, c.clock(), func(_ context.Context, i int) error {
				if tc.returnsAt != nil {
					c.advanceTo(tc.returnsAt(i))
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s\nrun: %v", tc.reason, err)
			}
			got := offsetsOf(c, res)
			if tc.returnsAt == nil {
				for i := range got.Done {
					if got.Done[i] < got.Started[i] {
						t.Errorf("%s\noperation %d returned at +%v, before it started at +%v", tc.reason, i, got.Done[i], got.Started[i])
					}
				}
				got.Done = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nschedule (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWorkers: calls that block hold their worker; no more than Workers run at once, and an
// operation due while all are busy starts late, which Lag reports.
func TestWorkers(t *testing.T) {
	type outcome struct {
		// MaxRunning is the most operations that ran at once.
		MaxRunning int
		// FirstLate is the first operation that started after it was due, -1 if none.
		FirstLate int
		// Lagged is whether Lag is more than 0.
		Lagged bool
	}
	cases := map[string]struct {
		reason  string
		workers int
		n       int
		want    outcome
	}{
		"ThreeWorkers": {
			reason:  "three blocked calls take every worker; the fourth waits for one and starts late",
			workers: 3,
			n:       6,
			want:    outcome{MaxRunning: 3, FirstLate: 3, Lagged: true},
		},
		"OneWorker": {
			reason:  "one worker runs one call at a time",
			workers: 1,
			n:       3,
			want:    outcome{MaxRunning: 1, FirstLate: 1, Lagged: true},
		},
		"DefaultWorkers": {
			reason:  "Workers 0 means 20",
			workers: 0,
			n:       22,
			want:    outcome{MaxRunning: 20, FirstLate: 20, Lagged: true},
		},
		"EnoughWorkers": {
			reason:  "while a worker is free, blocked calls do not delay the next ones",
			workers: 4,
			n:       4,
			want:    outcome{MaxRunning: 4, FirstLate: -1, Lagged: false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newFakeClock()
			var running, maxRunning atomic.Int32
			started := make(chan int, tc.n)
			release := make(chan struct{})
			type ran struct {
				res Result
				err error
			}
			done := make(chan ran, 1)
			go func() {
				res, err := run(t.Context(), Options{Rate: 1, N: tc.n, Workers: tc.workers}, c.clock(), func(_ context.Context, i int) error {
					now := running.Add(1)
					for m := maxRunning.Load(); now > m && !maxRunning.CompareAndSwap(m, now); m = maxRunning.Load() {
					}
					started <- i
					<-release
					running.Add(-1)
					return nil
				})
				done <- ran{res, err}
			}()

			workers := tc.workers
			if workers == 0 {
				workers = DefaultWorkers
			}
			busy := min(tc.n, workers)
			for range busy {
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s\nonly %d of %d operations started", tc.reason, running.Load(), busy)
				}
			}
			// Give a dispatcher that ignored the bound time to start one more call, then let
			// the waiting operations fall behind their schedule before releasing the workers.
			time.Sleep(20 * time.Millisecond)
			c.advanceTo(time.Hour)
			close(release)
			r := <-done
			if r.err != nil {
				t.Fatalf("%s\nrun: %v", tc.reason, r.err)
			}

			got := outcome{MaxRunning: int(maxRunning.Load()), FirstLate: -1, Lagged: r.res.Lag() > 0}
			for i, op := range r.res.Ops {
				if op.Started.After(op.Scheduled) {
					got.FirstLate = i
					break
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
			if len(r.res.Ops) != tc.n {
				t.Errorf("%s\n%d operations recorded, want %d", tc.reason, len(r.res.Ops), tc.n)
			}
		})
	}
}

// TestErrorsCollected: failures do not stop the run; Errors names the first 10 in index order
// and Failed counts them all.
func TestErrorsCollected(t *testing.T) {
	errOdd := errors.New("odd")
	c := newFakeClock()
	res, err := run(t.Context(), Options{Rate: 100, N: 25, Workers: 3}, c.clock(), func(_ context.Context, i int) error {
		if i%2 == 1 {
			return fmt.Errorf("claim %d: %w", i, errOdd)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("an operation's error stopped the run: %v", err)
	}
	type failure struct {
		Index int
		Err   string
	}
	var got []failure
	for _, f := range res.Errors() {
		if !errors.Is(f.Err, errOdd) {
			t.Errorf("operation %d: error %v does not wrap what the operation returned", f.Index, f.Err)
		}
		got = append(got, failure{f.Index, f.Err.Error()})
	}
	var want []failure
	for i := 1; i < 20; i += 2 {
		want = append(want, failure{i, fmt.Sprintf("claim %d: odd", i)})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Errors: the first 10 failures in order (-want +got):\n%s", diff)
	}
	if got, want := res.Failed(), 12; got != want {
		t.Errorf("Failed() = %d, want %d", got, want)
	}
	if got, want := len(res.Ops), 25; got != want {
		t.Errorf("%d operations recorded, want %d: failures must not stop the run", got, want)
	}
}

// TestCancel: when ctx ends Run starts nothing more, wherever the dispatcher is waiting, lets
// the running operations finish, and returns ctx's error with the operations that started.
func TestCancel(t *testing.T) {
	cases := map[string]struct {
		reason        string
		opts          Options
		wall          time.Duration
		cancelBefore  bool
		op            func(ctx context.Context, i int, cancel func()) error
		wantCalled    []int
		wantOpErrored []bool
	}{
		"BeforeTheStart": {
			reason:       "a ctx that has already ended starts nothing",
			opts:         Options{Rate: 10, N: 5},
			cancelBefore: true,
			op:           func(context.Context, int, func()) error { return nil },
		},
		"WhileWaitingForTheNextDueTime": {
			reason: "the dispatcher sleeping until operation 5 is due wakes when ctx ends, and starts no more",
			opts:   Options{Rate: 1, N: 10, Workers: 3},
			wall:   5 * time.Second,
			op: func(_ context.Context, i int, cancel func()) error {
				if i == 4 {
					cancel()
				}
				return nil
			},
			wantCalled:    []int{0, 1, 2, 3, 4},
			wantOpErrored: []bool{false, false, false, false, false},
		},
		"WhileWaitingForAWorker": {
			reason: "operation 2 waits for a worker when ctx ends and never starts; the running two finish, seeing ctx ended",
			opts:   Options{Rate: 1, N: 10, Workers: 2},
			op: func(ctx context.Context, i int, cancel func()) error {
				if i == 1 {
					cancel()
				}
				<-ctx.Done()
				return ctx.Err()
			},
			wantCalled:    []int{0, 1},
			wantOpErrored: []bool{true, true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newFakeClock()
			c.wall = tc.wall
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancelBefore {
				cancel()
			}
			var mu sync.Mutex
			called := []int(nil)
			res, err := run(ctx, tc.opts, c.clock(), func(ctx context.Context, i int) error {
				mu.Lock()
				called = append(called, i)
				mu.Unlock()
				return tc.op(ctx, i, cancel)
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s\nrun returned %v, want it to wrap context.Canceled", tc.reason, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tc.wantCalled, called, cmp.Transformer("sort", func(in []int) []int { return slices.Sorted(slices.Values(in)) })); diff != "" {
				t.Errorf("%s\noperations called (-want +got):\n%s", tc.reason, diff)
			}
			var errored []bool
			for _, op := range res.Ops {
				errored = append(errored, op.Err != nil)
			}
			if diff := cmp.Diff(tc.wantOpErrored, errored); diff != "" {
				t.Errorf("%s\noperations recorded, failed or not (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestValidation: invalid options name their field and run nothing.
func TestValidation(t *testing.T) {
	cases := map[string]struct {
		reason string
		opts   Options
		want   string
	}{
		"ZeroRate":      {"a rate of 0 never starts anything", Options{N: 1}, "loadgen: Rate must be more than 0, got 0"},
		"NegativeRate":  {"a negative rate", Options{Rate: -2, N: 1}, "loadgen: Rate must be more than 0, got -2"},
		"NaNRate":       {"NaN compares false with everything", Options{Rate: math.NaN(), N: 1}, "loadgen: Rate must be more than 0, got NaN"},
		"InfiniteRate":  {"an infinite rate is no schedule", Options{Rate: math.Inf(1), N: 1}, "loadgen: Rate must be finite, got +Inf"},
		"NegativeN":     {"a negative count", Options{Rate: 1, N: -1}, "loadgen: N must be 0 or more, got -1"},
		"NegativePool":  {"a negative pool", Options{Rate: 1, N: 1, Workers: -3}, "loadgen: Workers must be 1 or more (0 for 20), got -3"},
		"BeyondForever": {"the last due time must fit a time.Duration", Options{Rate: 1e-9, N: 11}, "loadgen: N (11) at Rate 1e-09 takes longer than a time.Duration holds"},
		"Valid":         {"Workers 0 is the default, not an error", Options{Rate: 1, N: 0}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := 0
			_, err := run(t.Context(), tc.opts, newFakeClock().clock(), func(context.Context, int) error {
				calls++
				return nil
			})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nerror (-want +got):\n%s", tc.reason, diff)
			}
			if err != nil && calls > 0 {
				t.Errorf("%s\n%d operations ran despite invalid options", tc.reason, calls)
			}
		})
	}
}

// TestResultSummaries: Lag and AchievedRate on hand-made results, the edge cases included.
func TestResultSummaries(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type summary struct {
		Lag          time.Duration
		AchievedRate float64
	}
	cases := map[string]struct {
		reason string
		ops    []Op
		want   summary
	}{
		"Empty": {
			reason: "no operation: no lag, and no rate (0)",
			want:   summary{},
		},
		"One": {
			reason: "one start has no interval, so the rate is 0",
			ops:    []Op{{Scheduled: at(0), Started: at(3 * time.Millisecond)}},
			want:   summary{Lag: 3 * time.Millisecond},
		},
		"OnSchedule": {
			reason: "four starts over 1.5 s are 2/s, and the first start's offset does not count",
			ops: []Op{
				{Scheduled: at(0), Started: at(100 * time.Millisecond)},
				{Scheduled: at(500 * time.Millisecond), Started: at(600 * time.Millisecond)},
				{Scheduled: at(time.Second), Started: at(1100 * time.Millisecond)},
				{Scheduled: at(1500 * time.Millisecond), Started: at(1600 * time.Millisecond)},
			},
			want: summary{Lag: 100 * time.Millisecond, AchievedRate: 2},
		},
		"FellBehind": {
			reason: "the lag is the worst operation's, and the rate counts the starts, not the schedule",
			ops: []Op{
				{Scheduled: at(0), Started: at(0)},
				{Scheduled: at(500 * time.Millisecond), Started: at(2 * time.Second)},
				{Scheduled: at(time.Second), Started: at(2 * time.Second)},
			},
			want: summary{Lag: 1500 * time.Millisecond, AchievedRate: 1},
		},
		"AllAtOnce": {
			reason: "starts at one instant are an infinite rate",
			ops:    []Op{{Scheduled: at(0), Started: at(0)}, {Scheduled: at(0), Started: at(0)}},
			want:   summary{AchievedRate: math.Inf(1)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := Result{Ops: tc.ops}
			got := summary{Lag: r.Lag(), AchievedRate: r.AchievedRate()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRealTime runs on the real clock, at a rate high enough to be short: the assertions are
// loose on purpose, a loaded 2-core machine wakes timers late by tens of milliseconds.
func TestRealTime(t *testing.T) {
	const rate, n = 200.0, 20
	var calls atomic.Int32
	res, err := Run(t.Context(), Options{Rate: rate, N: n}, func(context.Context, int) error {
		calls.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := calls.Load(); got != n {
		t.Fatalf("%d operations ran, want %d", got, n)
	}
	start := res.Ops[0].Scheduled
	for i, op := range res.Ops {
		if got, want := op.Scheduled.Sub(start), offset(i, rate); got != want {
			t.Errorf("operation %d due at +%v, want +%v", i, got, want)
		}
		if op.Started.Before(op.Scheduled) {
			t.Errorf("operation %d started %v before it was due", i, op.Scheduled.Sub(op.Started))
		}
		if op.Done.Before(op.Started) {
			t.Errorf("operation %d returned before it started", i)
		}
		if i > 0 && op.Started.Before(res.Ops[i-1].Started) {
			t.Errorf("operation %d started before operation %d", i, i-1)
		}
	}
	least := time.Duration(float64(n-1) / rate * float64(time.Second))
	// From the start of the schedule, not the first Started: operation 0 may itself start a
	// little late, and the last one on time.
	elapsed := res.Ops[n-1].Started.Sub(start)
	if elapsed < least || elapsed >= 3*least {
		t.Errorf("last start at +%v, want at least %v and less than %v (lag %v)", elapsed, least, 3*least, res.Lag())
	}
	t.Logf("elapsed %v, lag %v, achieved %.1f/s", elapsed, res.Lag(), res.AchievedRate())
}

// TestRealTimeStopsWaiting: on the real clock, a ctx that ends while the dispatcher waits for a
// due time a second away ends the wait, not the second.
func TestRealTimeStopsWaiting(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	res, err := Run(ctx, Options{Rate: 1, N: 3}, func(context.Context, int) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("run returned %v, want it to wrap context.DeadlineExceeded", err)
	}
	if got := len(res.Ops); got != 1 {
		t.Errorf("%d operations started, want 1", got)
	}
	if took := time.Since(begin); took > 900*time.Millisecond {
		t.Errorf("run took %v after ctx ended at 50ms", took)
	}
}
