package render

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// ClaimExpiredMessage is the Ready message of a claim whose lifecycle ended.
const ClaimExpiredMessage = "Claim expired. Sandbox cleanup initiated."

// claimExpireAt is when a claim's lifecycle ends: the earlier of lifecycle.shutdownTime and the
// time its mirrored Finished=True condition turned true plus ttlSecondsAfterFinished. No lifecycle
// (or neither bound) means never (nil).
func claimExpireAt(claim *extv1beta1.SandboxClaim) *time.Time {
	l := claim.Spec.Lifecycle
	if l == nil {
		return nil
	}
	var at *time.Time
	if l.ShutdownTime != nil {
		t := l.ShutdownTime.Time
		at = &t
	}
	finished := meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionFinished)
	if l.TTLSecondsAfterFinished != nil && finished != nil && finished.Status == metav1.ConditionTrue && !finished.LastTransitionTime.IsZero() {
		t := finished.LastTransitionTime.Add(time.Duration(*l.TTLSecondsAfterFinished) * time.Second)
		if at == nil || t.Before(*at) {
			at = &t
		}
	}
	return at
}

// ClaimExpiry decides, given the time, upstream's two-pass claim expiry: the first expired pass
// marks Ready=False/ClaimExpired, the next one carries out the shutdown policy: Retain (the
// default) deletes the claim's Sandbox, if the claim controls it, and keeps the claim; Delete and
// DeleteForeground delete the claim (its Sandbox goes with it through the owner reference), with
// that propagation: under Foreground the claim lingers until its Sandbox and Pod are gone.
func ClaimExpiry(claim *extv1beta1.SandboxClaim, now time.Time) ExpiryDecision {
	at := claimExpireAt(claim)
	if at == nil {
		return ExpiryDecision{Step: NotExpired}
	}
	if now.Before(*at) {
		return ExpiryDecision{Step: NotExpired, RequeueAfter: metav1.Duration{Duration: at.Sub(now)}}
	}
	if c := meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionReady); c == nil || c.Reason != extv1beta1.ClaimExpiredReason {
		return ExpiryDecision{Step: MarkExpired, RequeueAfter: metav1.Duration{Duration: time.Millisecond}}
	}
	switch claim.Spec.Lifecycle.ShutdownPolicy {
	case extv1beta1.ShutdownPolicyDelete:
		return ExpiryDecision{Step: cleanUp, DeleteClaim: metav1.DeletePropagationBackground}
	case extv1beta1.ShutdownPolicyDeleteForeground:
		return ExpiryDecision{Step: cleanUp, DeleteClaim: metav1.DeletePropagationForeground}
	}
	return ExpiryDecision{Step: cleanUp, DeleteSandbox: true}
}

// claimNotOwnedError is the error of a Retain cleanup that finds a Sandbox the claim does not
// control: upstream reports it as ClaimExpired and skips the deletion.
func claimNotOwnedError(sandbox, claim string) *ClaimError {
	return &ClaimError{Reason: extv1beta1.ClaimExpiredReason,
		Err: fmt.Sprintf("sandbox not owned by this claim: sandbox %q is not owned by claim %q", sandbox, claim)}
}

// ClaimStatusInputs are what a claim's status is computed from: its Sandbox after the pass, and
// why it has none.
type ClaimStatusInputs struct {
	// Sandbox is the claim's Sandbox as observed, nil if there is none.
	Sandbox *agentsv1beta1.Sandbox
	// Err is why the claim has no Sandbox, if it is a claim problem.
	Err *ClaimError
	// Expired is set once the claim's lifecycle has ended (its expiry step is not NotExpired).
	Expired bool
	// ReadyDeadline is how long a claim's Sandbox may stay not Ready before the claim says it
	// will not become Ready by itself (Options.ClaimReadyDeadline); zero never says so.
	ReadyDeadline time.Duration
}

// ClaimStatus is the status upstream writes for a claim: Ready from the error (by reason), the
// expiry, or the Sandbox (its Ready condition copied, with the claim's generation); Finished
// mirrored from the Sandbox (kept while an expired claim's Sandbox is gone); the Sandbox's name and
// pod IPs. Conditions are sorted by type, as upstream sorts them before writing.
func ClaimStatus(claim *extv1beta1.SandboxClaim, obs ClaimStatusInputs, now metav1.Time) extv1beta1.SandboxClaimStatus {
	st := *claim.Status.DeepCopy()
	ready := claimReady(claim, obs, now.Time)
	if ready.LastTransitionTime.IsZero() {
		ready.LastTransitionTime = now
	}
	meta.SetStatusCondition(&st.Conditions, ready)

	switch {
	case obs.Sandbox != nil:
		if f := meta.FindStatusCondition(obs.Sandbox.Status.Conditions, agentsv1beta1.ConditionFinished); f != nil {
			meta.SetStatusCondition(&st.Conditions, *f)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.ConditionFinished)
		}
	case !obs.Expired:
		meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.ConditionFinished)
	}

	switch {
	case obs.Sandbox != nil:
		st.SandboxStatus.Name = obs.Sandbox.Name
		st.SandboxStatus.PodIPs = slices.Clone(obs.Sandbox.Status.PodIPs)
	case obs.Err == nil || obs.Err.Reason == extv1beta1.ClaimExpiredReason:
		st.SandboxStatus = extv1beta1.SandboxStatus{}
	}
	slices.SortStableFunc(st.Conditions, func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })
	return st
}

func claimReady(claim *extv1beta1.SandboxClaim, obs ClaimStatusInputs, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: claim.Generation}
	switch {
	case obs.Err != nil:
		c.Reason, c.Message = obs.Err.Reason, obs.Err.ConditionMessage()
		if obs.Err.Reason == extv1beta1.ClaimExpiredReason {
			c.Message = "Claim expired. " + obs.Err.Err + "; deletion skipped."
		}
	case obs.Expired:
		c.Reason, c.Message = extv1beta1.ClaimExpiredReason, ClaimExpiredMessage
	case obs.Sandbox == nil:
		c.Reason, c.Message = reasonSandboxMissing, "Sandbox does not exist"
	default:
		sbReady := meta.FindStatusCondition(obs.Sandbox.Status.Conditions, agentsv1beta1.ConditionReady)
		switch {
		case sbReady == nil:
			c.Reason, c.Message = reasonSandboxNotReady, "Sandbox is not ready"
		case sbReady.Reason == agentsv1beta1.ReasonSandboxExpired:
			c.Reason, c.Message = agentsv1beta1.ReasonSandboxExpired, "Underlying Sandbox resource has expired independently of the Claim."
		default:
			c = *sbReady.DeepCopy()
			c.ObservedGeneration = claim.Generation
		}
		if at, ok := claimReadyDeadlineAt(claim, obs.Sandbox, obs.ReadyDeadline); ok && startingReason(c) && !now.Before(at) {
			c.Message = fmt.Sprintf("%s: %s; not Ready %v after the claim was created or last Ready: it will not become Ready without someone acting", c.Reason, c.Message, obs.ReadyDeadline)
			c.Reason = extv1beta1.ProgressDeadlineExceededReason
		}
	}
	return c
}

// startingReason reports whether a claim's Ready condition says its Sandbox is still on its way
// to Ready (not yet a status, or its dependencies not Ready): the state a deadline can end. A
// finished Pod, an expiry or an error has a reason of its own, which stays.
func startingReason(c metav1.Condition) bool {
	return c.Status != metav1.ConditionTrue && (c.Reason == reasonSandboxNotReady || c.Reason == agentsv1beta1.ReasonDependenciesNotReady)
}

// claimReadyDeadlineAt is when a claim whose Sandbox sb is not Ready says it will not become
// Ready by itself: deadline after the latest of the claim's creation, its Sandbox's, and the last
// time its Ready condition turned False (a claim that was Ready and lost its Pod gets the whole
// deadline again, and so does a claim that only now got its Sandbox). False when deadline is
// zero, the claim is Ready, or the claim or its Sandbox has no creation time (an object no API
// server has stored yet, such as the Sandbox this very pass creates).
func claimReadyDeadlineAt(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, deadline time.Duration) (time.Time, bool) {
	if deadline <= 0 || sb == nil || claim.CreationTimestamp.IsZero() || sb.CreationTimestamp.IsZero() {
		return time.Time{}, false
	}
	start := claim.CreationTimestamp.Time
	if sb.CreationTimestamp.After(start) {
		start = sb.CreationTimestamp.Time
	}
	if cur := meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionReady); cur != nil {
		if cur.Status == metav1.ConditionTrue {
			return time.Time{}, false
		}
		if cur.LastTransitionTime.After(start) {
			start = cur.LastTransitionTime.Time
		}
	}
	return start.Add(deadline), true
}
