package scale_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/benchkit"
)

// timeline samples, once a second while a run's burst lasts, every request the API server
// counted and every process's CPU, so the report can say second by second what the API server
// was busy with while claims waited: a total over the whole window mixes the burst with the
// refill after it. It runs only with SANDBOX_SCALE_TIMELINE set (its /metrics reads are requests
// too, one a second).
type timeline struct {
	e    *scaleEnv
	pids map[string]int
	// metrics is the controller's /metrics address ("" for the floor).
	metrics string

	stop chan struct{}
	done sync.WaitGroup

	mu      sync.Mutex
	samples []timelineSample
}

type timelineSample struct {
	at       time.Time
	requests benchkit.Counts
	cpu      map[string]time.Duration
	// queues are the controller's work queues' depths and its busy workers, by reconciler.
	queues string
}

// startTimeline starts sampling, or returns nil when SANDBOX_SCALE_TIMELINE is not set.
func (e *scaleEnv) startTimeline(pids map[string]int, metrics string) *timeline {
	if os.Getenv("SANDBOX_SCALE_TIMELINE") == "" {
		return nil
	}
	t := &timeline{e: e, pids: pids, metrics: metrics, stop: make(chan struct{})}
	t.sample()
	t.done.Add(1)
	go func() {
		defer t.done.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tick.C:
				t.sample()
			}
		}
	}()
	return t
}

func (t *timeline) sample() {
	reqs, err := benchkit.Requests(context.Background(), t.e.cfg)
	if err != nil {
		return
	}
	s := timelineSample{at: time.Now(), requests: reqs, cpu: benchkit.CPU(t.pids), queues: queueGauges(t.metrics)}
	t.mu.Lock()
	t.samples = append(t.samples, s)
	t.mu.Unlock()
}

// finish stops sampling and returns the report: for each second, the claims created and seen
// Ready in it and the p99 of those created, each process's CPU, and the requests the API server
// served, busiest kinds first (reads and writes, by response code).
func (t *timeline) finish(created, ready []time.Time, latencies []time.Duration) string {
	if t == nil {
		return ""
	}
	close(t.stop)
	t.done.Wait()
	t.sample()
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	start := t.samples[0].at
	for i := 1; i < len(t.samples); i++ {
		prev, cur := t.samples[i-1], t.samples[i]
		var made, seen int
		var lat []time.Duration
		for j, c := range created {
			if !c.Before(prev.at) && c.Before(cur.at) {
				made++
				lat = append(lat, latencies[j])
			}
		}
		for _, r := range ready {
			if !r.Before(prev.at) && r.Before(cur.at) {
				seen++
			}
		}
		fmt.Fprintf(&b, "\n  %5.1fs: claims +%d Ready %d (p99 of those created %v);%s CPU", cur.at.Sub(start).Seconds(), made, seen,
			benchkit.Quantile(lat, 0.99).Round(time.Millisecond), cur.queues)
		names := make([]string, 0, len(cur.cpu))
		for name := range cur.cpu {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if d := cur.cpu[name] - prev.cpu[name]; d >= 10*time.Millisecond {
				fmt.Fprintf(&b, " %s %.0f%%", name, 100*d.Seconds()/cur.at.Sub(prev.at).Seconds())
			}
		}
		delta, total := cur.requests.Since(prev.requests, nil)
		type kv struct {
			k string
			v float64
		}
		var kinds []kv
		for k, v := range delta {
			kinds = append(kinds, kv{k, v})
		}
		slices.SortFunc(kinds, func(x, y kv) int { return cmp.Or(cmp.Compare(y.v, x.v), strings.Compare(x.k, y.k)) })
		fmt.Fprintf(&b, "; %.0f requests:", total)
		for _, x := range kinds {
			fmt.Fprintf(&b, " %s %.0f,", x.k, x.v)
		}
	}
	return b.String()
}

// queueGauges reads the controller's work queue depths and busy workers from its /metrics, as
// " queued/busy claim 12/50 sandbox 300/50 pool 0/1;" ("" when there is no controller).
func queueGauges(addr string) string {
	if addr == "" {
		return ""
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, m := range []string{"workqueue_depth{", "controller_runtime_active_workers{"} {
			rest, ok := strings.CutPrefix(line, m)
			if !ok {
				continue
			}
			i := strings.LastIndex(rest, "} ")
			if i < 0 {
				continue
			}
			for _, kv := range strings.Split(rest[:i], ",") {
				if k, v, _ := strings.Cut(kv, "="); k == "name" || k == "controller" {
					vals[m+strings.Trim(v, `"`)] = strings.TrimSpace(rest[i+2:])
				}
			}
		}
	}
	out := " queued/busy"
	for _, name := range []string{"sandboxclaim", "sandbox", "sandboxwarmpool"} {
		out += fmt.Sprintf(" %s %s/%s", strings.TrimPrefix(name, "sandbox"), vals["workqueue_depth{"+name], vals["controller_runtime_active_workers{"+name])
	}
	return out + ";"
}
