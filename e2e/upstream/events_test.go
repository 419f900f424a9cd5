package upstream

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stream is test2json's account of a run: a test that passes, one with a subtest that fails,
// one that skips itself, and one still running when the binary was killed.
const stream = `{"Time":"2026-12-05T08:00:00Z","Action":"start","Package":"e2e"}
{"Time":"2026-12-05T08:00:00Z","Action":"run","Package":"e2e","Test":"TestA"}
{"Time":"2026-12-05T08:00:00Z","Action":"output","Package":"e2e","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Time":"2026-12-05T08:00:01Z","Action":"output","Package":"e2e","Test":"TestA","Output":"    a_test.go:10: created namespace\n"}
{"Time":"2026-12-05T08:00:02Z","Action":"output","Package":"e2e","Test":"TestA","Output":"--- PASS: TestA (2.00s)\n"}
{"Time":"2026-12-05T08:00:02Z","Action":"pass","Package":"e2e","Test":"TestA","Elapsed":2}
{"Time":"2026-12-05T08:00:02Z","Action":"run","Package":"e2e","Test":"TestB"}
{"Time":"2026-12-05T08:00:02Z","Action":"run","Package":"e2e","Test":"TestB/warm"}
{"Time":"2026-12-05T08:00:03Z","Action":"output","Package":"e2e","Test":"TestB/warm","Output":"    b_test.go:20: timed out waiting for object\n"}
{"Time":"2026-12-05T08:00:03Z","Action":"output","Package":"e2e","Test":"TestB/warm","Output":"    --- FAIL: TestB/warm (1.00s)\n"}
{"Time":"2026-12-05T08:00:03Z","Action":"fail","Package":"e2e","Test":"TestB/warm","Elapsed":1}
{"Time":"2026-12-05T08:00:03Z","Action":"fail","Package":"e2e","Test":"TestB","Elapsed":1.5}
{"Time":"2026-12-05T08:00:03Z","Action":"run","Package":"e2e","Test":"TestC"}
{"Time":"2026-12-05T08:00:03Z","Action":"output","Package":"e2e","Test":"TestC","Output":"    c_test.go:5: SANDBOX_RUNTIME_CLASS not set\n"}
{"Time":"2026-12-05T08:00:03Z","Action":"skip","Package":"e2e","Test":"TestC","Elapsed":0}

{"Time":"2026-12-05T08:00:03Z","Action":"run","Package":"e2e","Test":"TestD"}
{"Time":"2026-12-05T08:00:04Z","Action":"output","Package":"e2e","Test":"TestD","Output":"    client.go:557: starting port-forward: kubectl -n x port-forward pod/p 9222:9222\n"}
{"Time":"2026-12-05T08:00:13Z","Action":"output","Package":"e2e","Output":"FAIL\n"}
{"Time":"2026-12-05T08:00:13Z","Action":"fail","Package":"e2e","Elapsed":13}
`

func TestParseEvents(t *testing.T) {
	got, err := ParseEvents("e2e", strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := []Outcome{
		{Package: "e2e", Test: "TestA", Result: Pass, Seconds: 2, Output: []string{"    a_test.go:10: created namespace"}},
		{Package: "e2e", Test: "TestB", Result: Fail, Seconds: 1.5},
		{Package: "e2e", Test: "TestB/warm", Result: Fail, Seconds: 1, Output: []string{"    b_test.go:20: timed out waiting for object"}},
		{Package: "e2e", Test: "TestC", Result: Skip, Seconds: 0, Output: []string{"    c_test.go:5: SANDBOX_RUNTIME_CLASS not set"}},
		// Never ended: its time runs to the run's last event.
		{Package: "e2e", Test: "TestD", Seconds: 10, Output: []string{"    client.go:557: starting port-forward: kubectl -n x port-forward pod/p 9222:9222"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseEvents (-want +got):\n%s", diff)
	}
}

func TestParseEventsRefusesWhatIsNotAnEvent(t *testing.T) {
	_, err := ParseEvents("e2e", strings.NewReader(`{"Action":"run","Test":"TestA"}`+"\n=== RUN TestA\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ParseEvents of a plain go test line: %v, want an error naming line 2", err)
	}
}
