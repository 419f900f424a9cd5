package render

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
