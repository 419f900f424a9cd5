// Package upstream turns a run of upstream agent-sandbox's own e2e suite (test/e2e and
// test/e2e/extensions of sigs.k8s.io/agent-sandbox) against this project's controller into a
// verdict: one row per test and subtest (PASS, FAIL or SKIP, with its seconds and why), and the
// problems that fail `make e2e-upstream`. Every test that cannot run on the local cluster is in
// List, by name, with the reason; a test that fails, skips without being listed, or passes while
// listed is a problem.
//
// It is pure: ParseEvents reads what `go tool test2json` wrote, Classify and Table compute from
// values. Starting the cluster, the controller and the test binaries is e2e's
// TestUpstreamE2E.
package upstream

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Result is a test's verdict.
type Result string

// The verdicts go test gives, which the table shows.
const (
	Pass Result = "PASS"
	Fail Result = "FAIL"
	Skip Result = "SKIP"
)

// Outcome is what go test reported of one test or subtest of one package.
type Outcome struct {
	Package string
	// Test is the test's name, with subtests after a slash as go test names them.
	Test string
	// Result is empty when the test started and never ended: its binary was stopped, timed out
	// or crashed.
	Result Result
	// Seconds is go test's elapsed time, or for a test that never ended the time from its start
	// to the last event of the run.
	Seconds float64
	// Output is what the test printed, line by line, without go test's framing (=== RUN,
	// --- PASS and the like).
	Output []string
}

// event is one line of `go tool test2json -t`.
type event struct {
	Time    time.Time
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

// ParseEvents reads the test2json events of one run of one package's test binary and returns
// every test that started, in the order they started, named as package pkg. A line that is not
// an event is an error: test2json writes nothing else.
func ParseEvents(pkg string, r io.Reader) ([]Outcome, error) {
	var (
		order   []string
		byName  = map[string]*Outcome{}
		started = map[string]time.Time{}
		last    time.Time
	)
	get := func(name string, at time.Time) *Outcome {
		o, ok := byName[name]
		if !ok {
			o = &Outcome{Package: pkg, Test: name}
			byName[name] = o
			order = append(order, name)
			started[name] = at
		}
		return o
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%s: line %d is not a test2json event: %w", pkg, n, err)
		}
		if e.Time.After(last) {
			last = e.Time
		}
		if e.Test == "" {
			continue // the package's own output and verdict
		}
		o := get(e.Test, e.Time)
		switch e.Action {
		case "pass", "fail", "skip":
			o.Result = Result(strings.ToUpper(e.Action))
			o.Seconds = e.Elapsed
		case "output":
			if !framing(e.Output) {
				o.Output = append(o.Output, strings.TrimRight(e.Output, "\n"))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: reading test2json events: %w", pkg, err)
	}
	out := make([]Outcome, 0, len(order))
	for _, name := range order {
		o := byName[name]
		if o.Result == "" && !started[name].IsZero() && last.After(started[name]) {
			o.Seconds = last.Sub(started[name]).Seconds()
		}
		out = append(out, *o)
	}
	return out, nil
}

// framing is a line go test writes around a test rather than the test itself.
func framing(line string) bool {
	l := strings.TrimSpace(line)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- FAIL", "--- SKIP"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}
