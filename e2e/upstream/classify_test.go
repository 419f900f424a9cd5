package upstream

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassify(t *testing.T) {
	portForward := Listed{Package: "e2e", Test: "TestChrome", Handling: StopAt, Marker: "starting port-forward", Reason: "needs Chrome in the Pod"}
	density := Listed{Package: "e2e", Test: "TestDensity", Handling: SkipsItself, Reason: "a benchmark"}
	burst := Listed{Package: "e2e", Test: "TestBurst", Handling: NotRun, Reason: "a load test"}
	fatal := []string{"    client.go:280: timed out waiting for object: Ready is False"}
	cases := map[string]struct {
		reason   string
		suite    Suite
		outcomes []Outcome
		list     []Listed
		want     []Row
		// problems are substrings, one per expected problem, in order.
		problems []string
	}{
		"all pass": {
			reason:   "tests that pass are PASS rows, subtests after their test, and no problem",
			suite:    Suite{"e2e": {"TestA", "TestB"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestB", Result: Pass, Seconds: 3}, {Package: "e2e", Test: "TestA", Result: Pass, Seconds: 1}, {Package: "e2e", Test: "TestA/sub", Result: Pass, Seconds: 0.5}},
			want: []Row{
				{Package: "e2e", Test: "TestA", Result: Pass, Seconds: 1},
				{Package: "e2e", Test: "TestA/sub", Result: Pass, Seconds: 0.5},
				{Package: "e2e", Test: "TestB", Result: Pass, Seconds: 3},
			},
		},
		"a failure": {
			reason:   "a failed test is FAIL with what it waited for, and a problem",
			suite:    Suite{"e2e": {"TestA"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestA", Result: Fail, Seconds: 60, Output: fatal}},
			want:     []Row{{Package: "e2e", Test: "TestA", Result: Fail, Seconds: 60, Note: "timed out waiting for object: Ready is False"}},
			problems: []string{"e2e TestA: FAIL: timed out waiting for object"},
		},
		"a subtest fails": {
			reason: "a test failed by its subtest alone is a FAIL row, and the subtest's failure the one problem",
			suite:  Suite{"e2e": {"TestA"}},
			outcomes: []Outcome{
				{Package: "e2e", Test: "TestA", Result: Fail, Seconds: 70},
				{Package: "e2e", Test: "TestA/ok", Result: Pass, Seconds: 5},
				{Package: "e2e", Test: "TestA/warm", Result: Fail, Seconds: 65, Output: fatal},
			},
			want: []Row{
				{Package: "e2e", Test: "TestA", Result: Fail, Seconds: 70, Note: "a subtest failed"},
				{Package: "e2e", Test: "TestA/ok", Result: Pass, Seconds: 5},
				{Package: "e2e", Test: "TestA/warm", Result: Fail, Seconds: 65, Note: "timed out waiting for object: Ready is False"},
			},
			problems: []string{"e2e TestA/warm: FAIL: timed out waiting for object"},
		},
		"an unlisted skip": {
			reason:   "a test that skips itself without being listed is a problem: nothing may skip silently",
			suite:    Suite{"e2e": {"TestA"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestA", Result: Skip, Output: []string{"    a_test.go:3: SANDBOX_RUNTIME_CLASS not set"}}},
			want:     []Row{{Package: "e2e", Test: "TestA", Result: Skip, Note: "SANDBOX_RUNTIME_CLASS not set"}},
			problems: []string{"e2e TestA: skipped itself (\"SANDBOX_RUNTIME_CLASS not set\"), and the list does not name it"},
		},
		"a listed skip": {
			reason:   "a test listed as skipping itself that does is SKIP with the list's reason",
			suite:    Suite{"e2e": {"TestDensity"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestDensity", Result: Skip, Output: []string{"    d_test.go:3: pass -run-perf-load-test"}}},
			list:     []Listed{density},
			want:     []Row{{Package: "e2e", Test: "TestDensity", Result: Skip, Note: "a benchmark"}},
		},
		"a listed test passes": {
			reason:   "a listed test that passes is flagged: the list is out of date",
			suite:    Suite{"e2e": {"TestDensity"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestDensity", Result: Pass, Seconds: 5}},
			list:     []Listed{density},
			want:     []Row{{Package: "e2e", Test: "TestDensity", Result: Pass, Seconds: 5, Note: "listed (skips itself): a benchmark"}},
			problems: []string{"e2e TestDensity: passed, but the list says it cannot run here (a benchmark): take it off the list"},
		},
		"not run": {
			reason: "a NotRun test is SKIP without seconds",
			suite:  Suite{"e2e": {"TestBurst"}},
			list:   []Listed{burst},
			want:   []Row{{Package: "e2e", Test: "TestBurst", Result: Skip, Seconds: -1, Note: "not run: a load test"}},
		},
		"stopped at its marker": {
			reason:   "a StopAt test killed after its marker is SKIP: everything before the marker held",
			suite:    Suite{"e2e": {"TestChrome"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestChrome", Seconds: 7, Output: []string{"    client.go:557: starting port-forward: kubectl ..."}}},
			list:     []Listed{portForward},
			want:     []Row{{Package: "e2e", Test: "TestChrome", Result: Skip, Seconds: 7, Note: `stopped at "starting port-forward": needs Chrome in the Pod`}},
		},
		"failed before its marker": {
			reason:   "a StopAt test that fails before its marker is a FAIL like any other",
			suite:    Suite{"e2e": {"TestChrome"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestChrome", Result: Fail, Seconds: 60, Output: fatal}},
			list:     []Listed{portForward},
			want:     []Row{{Package: "e2e", Test: "TestChrome", Result: Fail, Seconds: 60, Note: "timed out waiting for object: Ready is False"}},
			problems: []string{"e2e TestChrome: FAIL"},
		},
		"ended without its marker": {
			reason:   "a StopAt test whose binary ended before the marker (a timeout, a crash) is FAIL",
			suite:    Suite{"e2e": {"TestChrome"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestChrome", Seconds: 600, Output: fatal}},
			list:     []Listed{portForward},
			want:     []Row{{Package: "e2e", Test: "TestChrome", Result: Fail, Seconds: 600, Note: `did not reach "starting port-forward": timed out waiting for object: Ready is False`}},
			problems: []string{`e2e TestChrome: FAIL: did not reach "starting port-forward"`},
		},
		"did not finish": {
			reason:   "an unlisted test that never ended is FAIL",
			suite:    Suite{"e2e": {"TestA"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestA", Seconds: 2400}},
			want:     []Row{{Package: "e2e", Test: "TestA", Result: Fail, Seconds: 2400, Note: "did not finish"}},
			problems: []string{"e2e TestA: FAIL: did not finish"},
		},
		"did not run": {
			reason:   "a test of the suite that never started, not being NotRun, is FAIL",
			suite:    Suite{"e2e": {"TestA", "TestB"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestA", Result: Pass}},
			want:     []Row{{Package: "e2e", Test: "TestA", Result: Pass}, {Package: "e2e", Test: "TestB", Result: Fail, Seconds: -1, Note: "did not run"}},
			problems: []string{"e2e TestB: did not run"},
		},
		"listed but gone": {
			reason:   "a listed test the suite no longer has is flagged, as after an upgrade",
			suite:    Suite{"e2e": {"TestA"}},
			outcomes: []Outcome{{Package: "e2e", Test: "TestA", Result: Pass}},
			list:     []Listed{burst},
			want:     []Row{{Package: "e2e", Test: "TestA", Result: Pass}},
			problems: []string{"e2e TestBurst: listed (not run), but upstream's suite has no such test"},
		},
		"packages in order": {
			reason:   "e2e before extensions, as Packages runs them",
			suite:    Suite{"extensions": {"TestX"}, "e2e": {"TestA"}},
			outcomes: []Outcome{{Package: "extensions", Test: "TestX", Result: Pass}, {Package: "e2e", Test: "TestA", Result: Pass}},
			want:     []Row{{Package: "e2e", Test: "TestA", Result: Pass}, {Package: "extensions", Test: "TestX", Result: Pass}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Classify(tc.suite, tc.outcomes, tc.list)
			if diff := cmp.Diff(tc.want, got.Rows); diff != "" {
				t.Errorf("%s\nrows (-want +got):\n%s", tc.reason, diff)
			}
			if len(got.Problems) != len(tc.problems) {
				t.Fatalf("%s\nproblems %q, want %d like %q", tc.reason, got.Problems, len(tc.problems), tc.problems)
			}
			for i, p := range tc.problems {
				if !strings.Contains(got.Problems[i], p) {
					t.Errorf("%s\nproblem %d: %q, want it to contain %q", tc.reason, i, got.Problems[i], p)
				}
			}
			for _, row := range got.Rows {
				ran := row.Note != "did not run" && row.Note != "a subtest failed"
				if _, kept := got.Failures[row.Package+" "+row.Test]; kept != (row.Result == Fail && ran) {
					t.Errorf("%s\nFailures has %s %s: %v, want it for exactly the failed tests that ran", tc.reason, row.Package, row.Test, kept)
				}
			}
		})
	}
}

func TestFailureSummary(t *testing.T) {
	cases := map[string]struct {
		reason string
		output []string
		want   string
	}{
		"testify": {
			reason: "testify's Messages, then its Error in parentheses",
			output: []string{
				"    sandboxclaim_metric_test.go:95: ",
				"        \tError Trace:\tsigs.k8s.io/agent-sandbox@v1.0.1/test/e2e/extensions/sandboxclaim_metric_test.go:95",
				"        \tError:      \tShould be true",
				"        \tTest:       \tTestSandboxClaimObservabilityAnnotation",
				"        \tMessages:   \texpected annotation \"agents.x-k8s.io/controller-first-observed-at\" to be present",
			},
			want: `expected annotation "agents.x-k8s.io/controller-first-observed-at" to be present (Should be true)`,
		},
		"testify, an error over lines": {
			reason: "a multi-line Error is joined; the first assertion is the one kept",
			output: []string{
				"    shutdown_policy_test.go:296: ",
				"        \tError Trace:\tshutdown_policy_test.go:296",
				"        \tError:      \tReceived unexpected error:",
				"        \t            \ttimed out waiting for object: context deadline exceeded",
				"        \tTest:       \tTestX",
				"    client.go:200: cleanup",
				"    x_test.go:1: ",
				"        \tError:      \tsecond",
			},
			want: "Received unexpected error: timed out waiting for object: context deadline exceeded",
		},
		"cleanup after the failure": {
			reason: "what the framework logs in its cleanup and log collection, after the failure, is not the failure",
			output: []string{
				"    client.go:480: MustWaitForObject(*v1beta1.SandboxClaim, [ReadyConditionIsTrue]) failed with: timed out watching object",
				"    vct_test.go:140: Deleting object *v1beta1.SandboxClaim (ns/vct-claim)",
				"    vct_test.go:140: WaitForObjectNotFound *v1beta1.SandboxClaim (ns/vct-claim) took 3ms",
				"    vct_test.go:136: failed to get logs for pod agent-sandbox-controller-x: connection refused",
			},
			want: "MustWaitForObject(*v1beta1.SandboxClaim, [ReadyConditionIsTrue]) failed with: timed out watching object",
		},
		"fatal": {
			reason: "without testify, the last message logged: t.Fatal's",
			output: []string{"    client.go:240: waiting for Ready", "    client.go:280: timed out waiting for object: Ready is False"},
			want:   "timed out waiting for object: Ready is False",
		},
		"nothing": {
			reason: "no message at all gives an empty summary",
			want:   "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := FailureSummary(tc.output); got != tc.want {
				t.Errorf("%s\nFailureSummary = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	r := Report{Rows: []Row{
		{Package: "e2e", Test: "TestSimpleSandbox", Result: Pass, Seconds: 2.04},
		{Package: "extensions", Test: "TestBurst", Result: Skip, Seconds: -1, Note: "not run: a|b"},
		{Package: "extensions", Test: "TestX/sub", Result: Fail, Seconds: 61, Note: "timed out"},
	}}
	want := `| package    | test              | result | seconds | note |
| ---------- | ----------------- | ------ | ------- | --- |
| e2e        | TestSimpleSandbox | PASS   | 2.0     |  |
| extensions | TestBurst         | SKIP   | -       | not run: a\|b |
| extensions | TestX/sub         | FAIL   | 61.0    | timed out |

1 PASS, 1 FAIL, 1 SKIP
`
	if diff := cmp.Diff(want, Table(r)); diff != "" {
		t.Errorf("Table (-want +got):\n%s", diff)
	}
}

func TestDetails(t *testing.T) {
	r := Report{
		Problems: []string{"e2e TestA: FAIL: x"},
		Failures: map[string][]string{"e2e TestA": {"one", "two", "three"}},
	}
	got := Details(r, 2)
	for _, want := range []string{"- e2e TestA: FAIL: x", "## e2e TestA", "[1 lines before]\ntwo\nthree\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("Details:\n%s\nwant it to contain %q", got, want)
		}
	}
	if got := Details(Report{}, 2); got != "No problems.\n" {
		t.Errorf("Details of a clean run = %q", got)
	}
}

// TestList holds the list to what a run needs of it: every entry of a package that runs, with
// a reason, a marker exactly when it is stopped at one, and named once.
func TestList(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range List {
		name := l.Package + " " + l.Test
		if !slices.ContainsFunc(Packages, func(p Package) bool { return p.Name == l.Package }) {
			t.Errorf("%s: no such package in Packages", name)
		}
		if seen[name] {
			t.Errorf("%s: listed twice", name)
		}
		seen[name] = true
		if l.Reason == "" {
			t.Errorf("%s: no reason", name)
		}
		if (l.Marker != "") != (l.Handling == StopAt) {
			t.Errorf("%s: handling %s with marker %q: a marker is for StopAt tests, and they need one", name, l.Handling, l.Marker)
		}
	}
}

func TestPatterns(t *testing.T) {
	list := []Listed{
		{Package: "e2e", Test: "TestA", Handling: StopAt},
		{Package: "e2e", Test: "TestB", Handling: SkipsItself},
		{Package: "e2e", Test: "TestC", Handling: NotRun},
		{Package: "extensions", Test: "TestD", Handling: StopAt},
	}
	if got, want := SkipPattern(list, "e2e"), "^(TestA|TestC)$"; got != want {
		t.Errorf("SkipPattern(e2e) = %q, want %q (the StopAt and NotRun tests, not those that skip themselves)", got, want)
	}
	if got := SkipPattern(list, "other"); got != "" {
		t.Errorf("SkipPattern of a package with nothing listed = %q, want none", got)
	}
	if got, want := RunPattern("TestA"), "^(TestA)$"; got != want {
		t.Errorf("RunPattern = %q, want %q", got, want)
	}
	if diff := cmp.Diff([]Listed{list[0]}, StopAtTests(list, "e2e")); diff != "" {
		t.Errorf("StopAtTests (-want +got):\n%s", diff)
	}
}

func TestEnviron(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/root", "KUBECONFIG=/home/me/.kube/config", "SANDBOX_RUNTIME_CLASS=kata", "IMAGE_TAG=v9", "ARTIFACTS=/tmp/x", "GOFLAGS=-mod=readonly"}
	got := Environ(base, Package{Env: []string{"SANDBOX_POOL_SIZES=4"}}, "/run/kubeconfig", "/run/artifacts")
	want := []string{"PATH=/usr/bin", "HOME=/root", "GOFLAGS=-mod=readonly",
		"KUBECONFIG=/run/kubeconfig", "ARTIFACTS=/run/artifacts", "SANDBOX_REPORT_DIR=/run/artifacts/reports", "SANDBOX_POOL_SIZES=4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Environ: a developer's settings must not reach the suite (-want +got):\n%s", diff)
	}
}
