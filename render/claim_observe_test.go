package render

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
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

func TestClaimedSandbox(t *testing.T) {
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "claim-uid"}}
	owned := func(name string, uid types.UID, deleting bool) agentsv1beta1.Sandbox {
		sb := agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name,
			OwnerReferences: []metav1.OwnerReference{{Kind: "SandboxClaim", Name: "c", UID: uid, Controller: ptr.To(true)}}}}
		if deleting {
			sb.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return sb
	}
	cases := map[string]struct {
		items []agentsv1beta1.Sandbox
		want  string
	}{
		"None":                 {nil, ""},
		"Controlled":           {[]agentsv1beta1.Sandbox{owned("a", "claim-uid", false)}, "a"},
		"AnEarlierClaimOfName": {[]agentsv1beta1.Sandbox{owned("a", "old-uid", false)}, ""},
		"OnItsWayOut":          {[]agentsv1beta1.Sandbox{owned("a", "claim-uid", true), owned("b", "claim-uid", false)}, "b"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if sb := ClaimedSandbox(claim, tc.items); sb != nil {
				got = sb.Name
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}
