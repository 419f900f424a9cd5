package render

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

func TestClaimCreatedWhileRunning(t *testing.T) {
	started := time.Date(2026, 6, 1, 12, 0, 0, 600_000_000, time.UTC)
	claim := func(created time.Time) *extv1beta1.SandboxClaim {
		return &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	}
	cases := map[string]struct {
		created time.Time
		want    bool
	}{
		"Before":         {started.Add(-time.Minute).Truncate(time.Second), false},
		"SameSecond":     {started.Truncate(time.Second), false},
		"NextSecond":     {started.Truncate(time.Second).Add(time.Second), true},
		"LongAfterwards": {started.Add(time.Hour).Truncate(time.Second), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ClaimCreatedWhileRunning(claim(tc.created), started)); diff != "" {
				t.Errorf("created %v, started %v: -want +got:\n%s", tc.created, started, diff)
			}
		})
	}
}

func TestOfferable(t *testing.T) {
	type result struct{ Offer, Settled bool }
	cases := map[string]struct {
		w      *PendingWrite
		rv     string
		holder string
		want   result
	}{
		"NothingPending":         {nil, "7", "claim-a", result{true, false}},
		"OurWriteNotShownYet":    {&PendingWrite{From: "7"}, "7", "claim-a", result{false, false}},
		"OurWriteShown":          {&PendingWrite{From: "7"}, "8", "claim-a", result{true, true}},
		"AnotherHoldersInFlight": {&PendingWrite{Holder: "claim-b"}, "7", "claim-a", result{false, false}},
		"OwnInFlight":            {&PendingWrite{Holder: "claim-a"}, "7", "claim-a", result{true, false}},
		"InFlightAndShown":       {&PendingWrite{From: "6", Holder: "claim-b"}, "7", "claim-a", result{false, false}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			offer, settled := Offerable(tc.w, tc.rv, types.UID(tc.holder))
			if diff := cmp.Diff(tc.want, result{offer, settled}); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}
