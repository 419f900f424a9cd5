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

// progressDeadline is a pool's spec.progressDeadlineSeconds as a duration: 600 s when unset, as a
// Deployment's. The default lives here, not in the CRD, so that pools written without the field
// are stored and converted exactly as before.
func progressDeadline(pool *extv1beta1.SandboxWarmPool) time.Duration {
	s := extv1beta1.DefaultProgressDeadlineSeconds
	if p := pool.Spec.ProgressDeadlineSeconds; p != nil && *p > 0 {
		s = *p
	}
	return time.Duration(s) * time.Second
}

// poolRollout is what a pool's pass decided that its rollout status is computed from, besides
// its members and the time. PlanPool fills it from its judgement of the members and, under
// RollingUpdate, from its bounds.
type poolRollout struct {
	// TemplateFound says the pool's template exists (and hashes): without it no member is
	// created, none is judged stale, and none is counted as made from the current template.
	TemplateFound bool
	// Desired is how many members the pass keeps the pool at: spec.replicas, at most the limit
	// of members per pool.
	Desired int32
	// Stale are the members kept although made from another template (isStale, as the pass
	// judged them); OnReplenish keeps them until they are claimed.
	Stale map[*agentsv1beta1.Sandbox]bool
	// ReplacingStale counts the stale members the pass deletes, to be replaced.
	ReplacingStale int
	// ReplacesStale says the update strategy replaces stale members (Recreate, RollingUpdate):
	// its rollout is complete only once every member wanted is made from the current template
	// and no stale member is left. OnReplenish keeps stale members by design, so its rollout is
	// complete once the pool is full and Ready.
	ReplacesStale bool
	// Rolling are a RollingUpdate's bounds (nil under another strategy, or when they are
	// invalid). Its rollout replaces stale members from the first pass on (MembersUpdated), its
	// message says how, and its progress is measured as a Deployment's is, from the last
	// progress rather than from a member's creation: see poolRolloutStatus.
	Rolling *rollingBounds
	// TemplateHash is the current template's blueprint hash (the members'
	// sandbox-template-hash), which names a RollingUpdate's rollout in its messages as a
	// Deployment's names its new ReplicaSet: a rollout to another template begins anew.
	TemplateHash string
}

// poolRolloutStatus adds the rollout status to st, upstream's status of the same members
// (poolStatus): updatedReplicas and updatedReadyReplicas (members made from the current
// template, and of those the Ready ones), and the conditions Available and Progressing, set on
// the pool's previous conditions with meta.SetStatusCondition semantics (a transition time
// changes only with the condition's status, and is now; every condition carries the pool's
// generation).
//
//   - Available is True (MinimumReplicasAvailable) when at least spec.replicas members are
//     Ready, under RollingUpdate spec.replicas - maxUnavailable (a Deployment's rule: a rollout
//     that keeps its bound, or a claim taking a member, leaves the pool available), else False
//     (MinimumReplicasUnavailable).
//   - Progressing is False with TemplateNotFound without a template; False with RolloutComplete
//     once every member the strategy wants exists and is Ready; False with
//     ProgressDeadlineExceeded while a member made from the current template has existed for
//     longer than the progress deadline without becoming Ready; True with MembersUpdated while
//     stale members are replaced (from the pass that deletes them until the rollout ends; under
//     RollingUpdate from the first pass that finds one); otherwise True with NewMembersCreated.
//
// Under RollingUpdate the progress deadline is also measured from the rollout's last progress,
// as a Deployment's is: from the later of the moment the rollout began (Progressing turned True,
// or a rollout to another template began) and the last time a member made from the current
// template became Ready (its Ready condition's transition). A rollout with no such progress for
// longer than the deadline is ProgressDeadlineExceeded, and stays so until a member made from
// the current template becomes Ready after that, the rollout completes, or the template changes.
// Measuring from a member's creation alone would never get there with the default deadline: a
// member not Ready is replaced after the readiness grace (5 minutes), before it is 600 s old,
// and its replacement starts the count again. Its messages name the template hash the rollout
// goes to, as a Deployment's name its new ReplicaSet, and that is how a pass tells a rollout
// to another template from the one under way: metav1.Condition has no lastUpdateTime, so a new
// rollout sets Progressing anew, its transition time now even when it was True already (the one
// place these conditions depart from meta.SetStatusCondition).
//
// Messages carry the counts and nothing that changes while the members do not, so a pool at rest
// gets back the status it has. It also returns when the pass should come back for a progress
// deadline still to pass (zero for none): a second after it, as a Deployment's controller does,
// so that the deadline has passed by then.
func poolRolloutStatus(pool *extv1beta1.SandboxWarmPool, st extv1beta1.SandboxWarmPoolStatus, members []*agentsv1beta1.Sandbox, r poolRollout, now time.Time) (extv1beta1.SandboxWarmPoolStatus, time.Duration) {
	deadline := progressDeadline(pool)
	stuck, next := countUpdated(&st, members, r, deadline, now)
	stale := st.Replicas - st.UpdatedReplicas
	if !r.TemplateFound {
		stale = 0 // nothing is judged stale without a template
	}
	// A strategy that replaces stale members is complete once none is left (Recreate never keeps
	// one: its judgement deletes them all, so for it this is what it always was).
	complete := st.ReadyReplicas >= r.Desired && r.ReplacingStale == 0 &&
		(!r.ReplacesStale || st.UpdatedReadyReplicas >= r.Desired && stale == 0)
	prev := meta.FindStatusCondition(pool.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing)
	var stalled, begins bool
	rollout := fmt.Sprintf("(template hash %s)", r.TemplateHash)
	if r.Rolling != nil && r.TemplateFound {
		// A rollout begins when the last Progressing condition names no rollout to this template.
		begins = prev == nil || !strings.Contains(prev.Message, rollout)
		if !complete {
			var d time.Duration
			stalled, d = rollingStalled(prev, begins, members, r, deadline, now)
			if d > 0 && (next == 0 || d < next) {
				next = d
			}
		}
	}

	st.Conditions = slices.Clone(pool.Status.Conditions)  // never the cached object's own list
	at := metav1.NewTime(now.UTC().Truncate(time.Second)) // as the API server stores it
	set := func(c metav1.Condition) {
		c.ObservedGeneration, c.LastTransitionTime = pool.Generation, at
		meta.SetStatusCondition(&st.Conditions, c)
	}

	available := availableCondition(pool, st, r)
	set(available)

	counts := rolloutCounts(pool, st, r, stale, rollout)
	progressing := metav1.Condition{Type: extv1beta1.SandboxWarmPoolProgressing}
	switch {
	case !r.TemplateFound:
		progressing.Status, progressing.Reason = metav1.ConditionFalse, extv1beta1.PoolTemplateNotFoundReason
		progressing.Message = fmt.Sprintf("SandboxTemplate %q not found: no member is created or replaced; %d of %d members Ready",
			pool.Spec.TemplateRef.Name, st.ReadyReplicas, r.Desired)
		next = 0
	case complete:
		progressing.Status, progressing.Reason = metav1.ConditionFalse, extv1beta1.RolloutCompleteReason
		progressing.Message = "Every member wanted exists and is Ready: " + counts
		next = 0
	case stuck != nil:
		progressing.Status, progressing.Reason = metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason
		progressing.Message = fmt.Sprintf("Sandbox %q, made from the current template, is not Ready after progressDeadlineSeconds (%d): %s",
			stuck.Name, int64(deadline/time.Second), counts)
	case stalled:
		progressing.Status, progressing.Reason = metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason
		progressing.Message = fmt.Sprintf("No member made from the current template has become Ready within progressDeadlineSeconds (%d): %s",
			int64(deadline/time.Second), counts)
	case r.ReplacingStale > 0 || r.Rolling != nil && stale > 0 ||
		prev != nil && prev.Status == metav1.ConditionTrue && prev.Reason == extv1beta1.MembersUpdatedReason:
		// From the pass that deletes stale members until the rollout ends: their replacements
		// are still part of replacing them.
		progressing.Status, progressing.Reason = metav1.ConditionTrue, extv1beta1.MembersUpdatedReason
		progressing.Message = "Replacing members made from an older template: " + counts
	default:
		progressing.Status, progressing.Reason = metav1.ConditionTrue, extv1beta1.NewMembersCreatedReason
		progressing.Message = "Waiting for new members to be created and become Ready: " + counts
	}
	if begins && progressing.Status == metav1.ConditionTrue {
		meta.RemoveStatusCondition(&st.Conditions, extv1beta1.SandboxWarmPoolProgressing) // set anew: see above
	}
	set(progressing)
	return st, next
}

// countUpdated counts into st the members made from the current template and those of them
// Ready, and finds the oldest of them past the progress deadline (stuck, nil for none) and when
// the next one not Ready will be (next, zero for none).
func countUpdated(st *extv1beta1.SandboxWarmPoolStatus, members []*agentsv1beta1.Sandbox, r poolRollout, deadline time.Duration, now time.Time) (stuck *agentsv1beta1.Sandbox, next time.Duration) {
	st.UpdatedReplicas, st.UpdatedReadyReplicas = 0, 0
	for _, m := range members {
		if m.DeletionTimestamp != nil || !r.TemplateFound || r.Stale[m] {
			continue
		}
		st.UpdatedReplicas++
		if meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady) {
			st.UpdatedReadyReplicas++
			continue
		}
		// Exceeded once it has existed for longer than the deadline: at the deadline itself it
		// has not, yet.
		if due := m.CreationTimestamp.Add(deadline); now.After(due) {
			if stuck == nil || m.CreationTimestamp.Before(&stuck.CreationTimestamp) ||
				m.CreationTimestamp.Equal(&stuck.CreationTimestamp) && m.Name < stuck.Name {
				stuck = m
			}
		} else if d := due.Sub(now) + time.Second; next == 0 || d < next {
			next = d
		}
	}
	return stuck, next
}

// availableCondition is the pool's Available condition: True with enough members Ready, all it
// wants or, under RollingUpdate, all but maxUnavailable, as a Deployment's.
func availableCondition(pool *extv1beta1.SandboxWarmPool, st extv1beta1.SandboxWarmPoolStatus, r poolRollout) metav1.Condition {
	minimum, message := replicas(pool), fmt.Sprintf("%d of %d members Ready", st.ReadyReplicas, replicas(pool))
	if r.Rolling != nil && r.Rolling.MaxUnavailable > 0 {
		minimum -= int32(min(r.Rolling.MaxUnavailable, int(minimum)))
		message += fmt.Sprintf(" (at least %d wanted: maxUnavailable %d)", minimum, r.Rolling.MaxUnavailable)
	}
	available := metav1.Condition{Type: extv1beta1.SandboxWarmPoolAvailable, Status: metav1.ConditionFalse, Reason: extv1beta1.MinimumReplicasUnavailableReason,
		Message: message}
	if st.ReadyReplicas >= minimum {
		available.Status, available.Reason = metav1.ConditionTrue, extv1beta1.MinimumReplicasAvailableReason
	}
	return available
}

// rolloutCounts is the part of the Progressing message that counts the members: updated,
// updated Ready and desired (naming the rollout under RollingUpdate), and the stale members
// left and how they go.
func rolloutCounts(pool *extv1beta1.SandboxWarmPool, st extv1beta1.SandboxWarmPoolStatus, r poolRollout, stale int32, rollout string) string {
	counts := fmt.Sprintf("%d updated, %d updated Ready, %d desired", st.UpdatedReplicas, st.UpdatedReadyReplicas, r.Desired)
	if r.Rolling != nil && r.TemplateFound {
		counts = fmt.Sprintf("%d updated %s, %d updated Ready, %d desired", st.UpdatedReplicas, rollout, st.UpdatedReadyReplicas, r.Desired)
	}
	switch {
	case stale > 0 && !r.ReplacesStale:
		counts += fmt.Sprintf("; %d %s from an older template, replaced as %s claimed (updateStrategy %s)",
			stale, plural(stale, "member is", "members are"), plural(stale, "it is", "they are"), updateStrategy(pool))
	case stale > 0 && r.Rolling != nil:
		counts += fmt.Sprintf("; %d %s from an older template, replaced a few at a time (updateStrategy RollingUpdate, maxSurge %d, maxUnavailable %d)",
			stale, plural(stale, "member is", "members are"), r.Rolling.MaxSurge, r.Rolling.MaxUnavailable)
	}
	return counts
}

// rollingStalled reports whether a RollingUpdate's rollout that is not complete has made no
// progress for longer than the deadline (see poolRolloutStatus), or else how long until it will
// have, a second after, as the member deadlines are requeued (zero when it is stalled already).
func rollingStalled(prev *metav1.Condition, begins bool, members []*agentsv1beta1.Sandbox, r poolRollout, deadline time.Duration, now time.Time) (bool, time.Duration) {
	if begins {
		prev = nil // a rollout to another template: its count starts now
	}
	var lastReady time.Time // the last time a member made from the current template became Ready
	for _, m := range members {
		if m.DeletionTimestamp != nil || r.Stale[m] {
			continue
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, agentsv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.After(lastReady) {
			lastReady = c.LastTransitionTime.Time
		}
	}
	if prev != nil && prev.Status == metav1.ConditionFalse && prev.Reason == extv1beta1.ProgressDeadlineExceededReason {
		if !lastReady.After(prev.LastTransitionTime.Time) {
			return true, 0 // no progress since it was exceeded
		}
		prev = nil // progress resumed: Progressing turns True at this pass, the count starts now
	}
	since := now // the rollout begins at this pass, which turns Progressing True
	if prev != nil && prev.Status == metav1.ConditionTrue {
		since = prev.LastTransitionTime.Time
	}
	if lastReady.After(since) {
		since = lastReady
	}
	// Exceeded once the deadline has passed: at the deadline itself it has not, yet.
	due := since.Add(deadline)
	if now.After(due) {
		return true, 0
	}
	return false, due.Sub(now) + time.Second
}

func plural(n int32, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
