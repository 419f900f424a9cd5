package render

import (
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
