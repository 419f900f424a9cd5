package render

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RefusedOnMerits tells a write the API server refused on its merits (admission webhooks and
// PodSecurity, quotas, validation, a body too large), which no retry changes until someone
// acts, from one that failed on the way (a timeout, an unavailable server, a conflict), which
// the retry settles. A refusal on merits is what an object's status then reports (the plans'
// Refused), as upstream's Sandbox reports any error of a pass; the others are only retried.
func RefusedOnMerits(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// StatusWriteDropped tells a status write that is dropped without an error: a conflict (the
// object changed since it was read) or a missing object. Either change comes to the controller
// as a watch event, which brings the next pass with the object as it is.
func StatusWriteDropped(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// EchoNeedsNoPass tells whether the watch event of a pass's own status write (its echo) can be
// let go without a pass: next is the plan made on the object as that write leaves it, with the
// children as the pass found them, at the same time, and requeue is when the writing pass asked
// to come back (zero: never). The echo then shows nothing the pass did not know: a pass it brought
// would send nothing, record nothing, and ask to come back no sooner. A pass that wrote children
// has their own events bring the next pass, so it is asked only of a pass whose one write was
// its status (the controller's rule).
func EchoNeedsNoPass[S any](next *Plan[S], requeue time.Duration) bool {
	if len(next.Steps) > 0 || next.WriteStatus || len(next.After) > 0 || len(next.Events) > 0 || next.Error != "" {
		return false
	}
	again := next.RequeueAfter.Duration
	return again <= 0 || (requeue > 0 && again >= requeue)
}
