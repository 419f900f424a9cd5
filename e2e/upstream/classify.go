package upstream

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Row is one line of the table: a test or subtest and its verdict here.
type Row struct {
	Package, Test string
	Result        Result
	// Seconds is how long it ran; negative for a test that was not started.
	Seconds float64
	// Note says why a test skipped or was stopped, or what a failure waited for.
	Note string
}

// Report is the verdict of a run.
type Report struct {
	Rows []Row
	// Problems fail the run: each names the package and test and says what is wrong.
	Problems []string
	// Failures are the output of every failed test, by "package test", for the report's
	// details.
	Failures map[string][]string
}

// Count is how many rows have the result.
func (r Report) Count(res Result) int {
	n := 0
	for _, row := range r.Rows {
		if row.Result == res {
			n++
		}
	}
	return n
}

// Suite is the top-level tests of each package, as its binary's -test.list gives them, in
// order.
type Suite map[string][]string

// Classify decides every test's row from what ran (outcomes, from the main run of each package
// and from each StopAt test's own run) and the list:
//
//   - a test that passed is PASS; listed, it is also a problem (the list is out of date);
//   - a test that failed is FAIL and a problem, listed or not;
//   - a test that skipped itself is SKIP; unless listed as SkipsItself it is a problem;
//   - a NotRun test is SKIP, not started;
//   - a StopAt test that did not end and printed its marker is SKIP (stopped at the step it
//     cannot pass here); one that did not end without the marker is FAIL (it failed, hung or
//     timed out before it);
//   - any other test that did not end is FAIL, and so is a top-level test of the suite that
//     never started though it should have;
//   - a listed test the suite does not have is a problem (the list is out of date).
//
// Rows follow the suite's order, each test's subtests after it.
func Classify(suite Suite, outcomes []Outcome, list []Listed) Report {
	r := Report{Failures: map[string][]string{}}
	listed := map[string]Listed{}
	for _, l := range list {
		listed[key(l.Package, l.Test)] = l
		if !slices.Contains(suite[l.Package], l.Test) {
			r.Problems = append(r.Problems, fmt.Sprintf("%s %s: listed (%s), but upstream's suite has no such test: take it off the list", l.Package, l.Test, l.Handling))
		}
	}
	// Subtests after their test, tests in the suite's order.
	byTop := map[string][]Outcome{}
	for _, o := range outcomes {
		top, _, _ := strings.Cut(o.Test, "/")
		byTop[key(o.Package, top)] = append(byTop[key(o.Package, top)], o)
	}
	for _, pkg := range packageOrder(suite) {
		for _, test := range suite[pkg] {
			l, isListed := listed[key(pkg, test)]
			got := byTop[key(pkg, test)]
			if len(got) == 0 {
				if isListed && l.Handling == NotRun {
					r.Rows = append(r.Rows, Row{Package: pkg, Test: test, Result: Skip, Seconds: -1, Note: "not run: " + l.Reason})
					continue
				}
				r.Rows = append(r.Rows, Row{Package: pkg, Test: test, Result: Fail, Seconds: -1, Note: "did not run"})
				r.Problems = append(r.Problems, fmt.Sprintf("%s %s: did not run (its binary ended before it)", pkg, test))
				continue
			}
			for _, o := range got {
				r.add(o, l, isListed && o.Test == test, subtestFailed(got, o.Test))
			}
		}
	}
	return r
}

// add classifies one outcome; l applies when isListed. A test that failed only because a
// subtest did (subtestFailed, and no failure of its own) is a FAIL row but no problem of its
// own: the subtest's is the problem.
func (r *Report) add(o Outcome, l Listed, isListed, subtestFailed bool) {
	row := Row{Package: o.Package, Test: o.Test, Result: o.Result, Seconds: o.Seconds}
	name := o.Package + " " + o.Test
	switch {
	case o.Result == Fail && subtestFailed && FailureSummary(o.Output) == "":
		row.Note = "a subtest failed"
	case o.Result == Pass:
		if isListed {
			row.Note = "listed (" + l.Handling.String() + "): " + l.Reason
			r.Problems = append(r.Problems, fmt.Sprintf("%s: passed, but the list says it cannot run here (%s): take it off the list", name, l.Reason))
		}
	case o.Result == Fail:
		row.Note = FailureSummary(o.Output)
		r.Failures[name] = o.Output
		r.Problems = append(r.Problems, fmt.Sprintf("%s: FAIL: %s", name, row.Note))
	case o.Result == Skip:
		msg := SkipMessage(o.Output)
		if isListed && l.Handling == SkipsItself {
			row.Note = l.Reason
			break
		}
		row.Note = msg
		r.Problems = append(r.Problems, fmt.Sprintf("%s: skipped itself (%q), and the list does not name it: list it with the reason, or make it run", name, msg))
	case isListed && l.Handling == StopAt && printed(o.Output, l.Marker):
		row.Result = Skip
		row.Note = fmt.Sprintf("stopped at %q: %s", l.Marker, l.Reason)
	default:
		row.Result = Fail
		row.Note = "did not finish"
		if isListed && l.Handling == StopAt {
			row.Note = fmt.Sprintf("did not reach %q", l.Marker)
		}
		if s := FailureSummary(o.Output); s != "" {
			row.Note += ": " + s
		}
		r.Failures[name] = o.Output
		r.Problems = append(r.Problems, fmt.Sprintf("%s: FAIL: %s", name, row.Note))
	}
	r.Rows = append(r.Rows, row)
}

// subtestFailed is whether a subtest of test (at any depth) failed or did not finish.
func subtestFailed(outcomes []Outcome, test string) bool {
	for _, o := range outcomes {
		if strings.HasPrefix(o.Test, test+"/") && o.Result != Pass && o.Result != Skip {
			return true
		}
	}
	return false
}

// cleanupLine is how upstream's framework starts a test's cleanup (CreateWithCleanup's delete).
// What a test printed from there on is its cleanup and its log collection, after the failure.
const cleanupLine = "Deleting object "

// BeforeCleanup is a test's output up to its cleanup: where its failure is.
func BeforeCleanup(output []string) []string {
	for i, l := range output {
		if fileLine.MatchString(l) && strings.Contains(l, cleanupLine) {
			return output[:i]
		}
	}
	return output
}

// fileLine is the "file.go:123: " prefix of a line testing.T logs.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: ?`)

// testifyField is a field of testify's failure report: "Error:", "Messages:" and the like,
// after a tab.
var testifyField = regexp.MustCompile(`^\s*(Error Trace|Error|Test|Messages):\s*(.*)$`)

// FailureSummary is one line saying what a failed test waited for or asserted: testify's
// Messages and Error when it failed through testify, else the last message it logged (t.Fatal's)
// before its cleanup.
func FailureSummary(output []string) string {
	fields := map[string]string{}
	var field, last string
	for _, line := range BeforeCleanup(output) {
		if fileLine.MatchString(line) {
			field = ""
			if s := strings.TrimSpace(fileLine.ReplaceAllString(line, "")); s != "" {
				last = s
			}
			continue
		}
		if m := testifyField.FindStringSubmatch(line); m != nil {
			field = m[1]
			if _, seen := fields[field]; seen {
				field = "" // a second assertion: keep the first
				continue
			}
			fields[field] = strings.TrimSpace(m[2])
			continue
		}
		if field != "" {
			// A field's value over several lines, indented by tabs.
			fields[field] = strings.TrimSpace(fields[field] + " " + strings.TrimSpace(line))
		}
	}
	s := last
	switch errText, msgs := fields["Error"], fields["Messages"]; {
	case errText != "" && msgs != "":
		s = msgs + " (" + errText + ")"
	case errText != "":
		s = errText
	}
	return shorten(s, 400)
}

// SkipMessage is what a test said when it skipped: the last message it logged.
func SkipMessage(output []string) string {
	for i := len(output) - 1; i >= 0; i-- {
		if fileLine.MatchString(output[i]) {
			return strings.TrimSpace(fileLine.ReplaceAllString(output[i], ""))
		}
	}
	return ""
}

func printed(output []string, marker string) bool {
	for _, l := range output {
		if strings.Contains(l, marker) {
			return true
		}
	}
	return false
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func key(pkg, test string) string { return pkg + " " + test }

// packageOrder is the order of Packages, then any other package of the suite by name.
func packageOrder(suite Suite) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range Packages {
		if _, ok := suite[p.Name]; ok {
			out = append(out, p.Name)
			seen[p.Name] = true
		}
	}
	var rest []string
	for p := range suite {
		if !seen[p] {
			rest = append(rest, p)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
