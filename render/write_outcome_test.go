package render

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestWriteOutcome(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	cases := map[string]struct {
		err              error
		refused, dropped bool
	}{
		"Forbidden":     {apierrors.NewForbidden(gr, "p", errors.New("violates PodSecurity")), true, false},
		"Invalid":       {apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Required(field.NewPath("spec"), "")}), true, false},
		"BadRequest":    {apierrors.NewBadRequest("no"), true, false},
		"TooLarge":      {apierrors.NewRequestEntityTooLargeError("big"), true, false},
		"Conflict":      {apierrors.NewConflict(gr, "p", errors.New("changed")), false, true},
		"NotFound":      {apierrors.NewNotFound(gr, "p"), false, true},
		"Timeout":       {apierrors.NewTimeoutError("slow", 1), false, false},
		"Unavailable":   {apierrors.NewServiceUnavailable("down"), false, false},
		"NotAnAPIError": {errors.New("connection reset"), false, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := [2]bool{RefusedOnMerits(tc.err), StatusWriteDropped(tc.err)}
			if diff := cmp.Diff([2]bool{tc.refused, tc.dropped}, got); diff != "" {
				t.Errorf("[refused on merits, status write dropped] for %v: -want +got:\n%s", tc.err, diff)
			}
		})
	}
}

func TestEchoNeedsNoPass(t *testing.T) {
	type plan = Plan[struct{}]
	sec := func(n int) metav1.Duration { return metav1.Duration{Duration: time.Duration(n) * time.Second} }
	cases := map[string]struct {
		next    plan
		requeue time.Duration
		want    bool
	}{
		"nothing to do, nothing asked":           {plan{}, 0, true},
		"nothing to do, the writer comes back":   {plan{}, 5 * time.Second, true},
		"a step left":                            {plan{Steps: []Step{{Action: ActionCreate, Kind: "Pod", Name: "p"}}}, 0, false},
		"the status still differs":               {plan{WriteStatus: true}, 0, false},
		"an annotation write after the status":   {plan{After: []Step{{Kind: "Sandbox", Name: "s"}}}, 0, false},
		"an event to record":                     {plan{Events: []Event{{Type: "Normal", Reason: "R"}}}, 0, false},
		"a failure to retry":                     {plan{Error: "in the way"}, 0, false},
		"comes back, the writer never would":     {plan{RequeueAfter: sec(5)}, 0, false},
		"comes back sooner than the writer":      {plan{RequeueAfter: sec(2)}, 5 * time.Second, false},
		"comes back when the writer does":        {plan{RequeueAfter: sec(5)}, 5 * time.Second, true},
		"comes back later than the writer":       {plan{RequeueAfter: sec(9)}, 5 * time.Second, true},
		"only status events, which need a write": {plan{StatusEvents: []Event{{Type: "Warning", Reason: "R"}}}, 0, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, EchoNeedsNoPass(&tc.next, tc.requeue)); diff != "" {
				t.Errorf("EchoNeedsNoPass(%+v, %v): -want +got:\n%s", tc.next, tc.requeue, diff)
			}
		})
	}
}
