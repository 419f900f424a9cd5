package render

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// Pool pass limits, upstream's defaults.
const (
	// poolReadinessGrace is how long a member may stay not Ready before it is replaced
	// (--sandbox-warm-pool-readiness-grace-period).
	poolReadinessGrace = 5 * time.Minute
	// poolMaxBatch caps the members one pass creates or deletes (--sandbox-warm-pool-max-batch-size).
	poolMaxBatch = 300
	// poolUnschedulableRecheck is how often a held, unschedulable member is looked at again.
	poolUnschedulableRecheck = time.Minute
)

// Why a pool deletes a member.
const (
	deleteStaleOrphan = "StaleOrphan"
	deleteStale       = "Stale"
	deleteStuck       = "NotReadyAfterGrace"
	deleteScaleDown   = "ScaleDown"
)

// PoolFound is what a controller found in the cluster for one pool's pass.
type PoolFound struct {
	// Template is the pool's template, nil when it does not exist.
	Template *extv1beta1.SandboxTemplate
	// Sandboxes are the Sandboxes of the pool's namespace that carry its warm-pool label.
	Sandboxes []*agentsv1beta1.Sandbox
	// Taken are the names of every Sandbox of the namespace; new members never reuse one.
	Taken map[string]bool
	// InFlight counts members created or deleted by earlier passes that the Sandboxes found do
	// not show yet: creates count as members, deletes as terminating members.
	InFlightCreates, InFlightDeletes int
}

// PoolPlan is one pass of a pool (see Plan): orphans taken in, members deleted (each step's
// Reason says why), members created in slow-start batches, in that order; the status, which the
// scale subresource reads; and the warnings of a pool that cannot progress.
type PoolPlan struct {
	Plan[extv1beta1.SandboxWarmPoolStatus] `json:",inline"`
	// LimitedTo is Options.MaxPoolReplicas when spec.replicas asks for more: the pool is kept at
	// that limit (the render refuses such a pool; a controller cannot refuse an object that
	// already exists, so it says so instead). Zero when the pool is within the limit.
	LimitedTo int32 `json:"limitedTo,omitempty"`
}

// PoolWriteRecheck is the safety net of a pool pass that wrote members, or waits on writes of
// earlier passes the cache does not show yet: their watch events bring the next pass well
// before it, and a controller stops expecting them after it.
const PoolWriteRecheck = 30 * time.Second

// PlanPool computes a pool pass as upstream's warm-pool controller does: orphans with the
// pool's label are taken in (or deleted when stale), stale members go under Recreate, members not
// Ready after the grace period are replaced (unless unschedulable), then the pool is filled to
// spec.replicas with deterministic names or scaled down (not-Ready members first, then newest
// first, ties by name), at most poolMaxBatch at a time. Under RollingUpdate (our extension)
// stale members are instead replaced a few at a time within its bounds (roll) while any are
// left. With no template nothing is created and nothing is judged stale. Members another object
// controls are not the pool's. The status is upstream's (poolStatus) with the rollout's
// (poolRolloutStatus), and the pass comes back when a progress deadline passes, so that the
// status says so without any other event.
func PlanPool(pool *extv1beta1.SandboxWarmPool, found PoolFound, now time.Time, opts Options) *PoolPlan {
	plan := &PoolPlan{}
	t := found.Template
	var hashes PoolHashes
	if t != nil {
		var err error
		if hashes, err = TemplateHashes(t); err != nil {
			t = nil // a template whose hashes cannot be computed makes nothing and judges nothing
		}
	}
	desired := plan.desired(pool, opts)
	strategy := updateStrategy(pool)
	var bounds *rollingBounds
	var invalid error
	if strategy == extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType {
		b, err := poolRollingBounds(pool, int(desired))
		if bounds, invalid = &b, err; err != nil {
			bounds = nil // the CRD refuses such a pool: none of its stale members is replaced
		}
	}
	j := plan.judge(pool, found, t, hashes, now, opts)
	var active []*agentsv1beta1.Sandbox
	if bounds != nil && t != nil && len(j.stale) > 0 {
		active = plan.roll(pool, found, &j, t, hashes, int(desired), *bounds, opts)
	} else {
		active = plan.scale(pool, found, j.active, j.terminating, t, hashes, int(desired), opts)
	}
	plan.wait(active, now)
	if found.InFlightCreates+found.InFlightDeletes > 0 || len(plan.Steps) > 0 {
		plan.requeue(PoolWriteRecheck)
	}
	st, deadline := poolRolloutStatus(pool, poolStatus(pool, active), active, poolRollout{
		TemplateFound:  t != nil,
		Desired:        desired,
		Stale:          j.stale,
		ReplacingStale: j.replacingStale,
		ReplacesStale:  strategy != extv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType,
		Rolling:        bounds,
		TemplateHash:   hashes.Blueprint,
	}, now)
	plan.requeue(deadline)
	plan.Status = &st
	// Only a real change is written: the rollout status keeps every transition time and message
	// while nothing changes, so a pool at rest is not written on every pass.
	plan.WriteStatus = !equality.Semantic.DeepEqual(&st, &pool.Status)
	plan.warn(pool, j.held, invalid)
	// A claim takes a member that is Ready already: nobody waits on the refill, until so few are
	// left that the next claims would start cold.
	plan.Background = poolBackground(pool, st)
	return plan
}

// poolBackground says whether a pool whose status is st has no pass anybody waits on: it keeps
// its reserve of Ready members (a quarter of its replicas, at least one), so its refill and
// anything else it writes can wait behind the claims it serves. A controller asks it of the
// status as last written, before it reads anything for a pass.
func poolBackground(pool *extv1beta1.SandboxWarmPool, st extv1beta1.SandboxWarmPoolStatus) bool {
	return st.ReadyReplicas >= max(replicas(pool)/4, 1)
}

// PoolKeepsReserve is poolBackground on the status the pool's members among sandboxes give
// (poolMember, poolStatus), for a controller that asks before its pass reads anything else: the
// pool's status as last written lags the claims that took members since.
//
// It counts Ready members only until there are enough: a controller asks it on every member
// event of a burst of claims, of a pool of a thousand that keeps its reserve most of the time.
func PoolKeepsReserve(pool *extv1beta1.SandboxWarmPool, sandboxes []*agentsv1beta1.Sandbox) bool {
	need := max(replicas(pool)/4, 1) // PoolBackground's threshold, on PoolStatus's ReadyReplicas
	member := poolMemberOf(pool, NameHash(pool.Name))
	var ready int32
	for _, sb := range sandboxes {
		if sb.DeletionTimestamp == nil && meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) && member(sb) {
			if ready++; ready >= need {
				return true
			}
		}
	}
	return false
}

// judged is what judge made of a pool's members.
type judged struct {
	// active are the members that stay; held, those of them kept although not Ready after the
	// grace period because their Pod cannot be scheduled.
	active, held []*agentsv1beta1.Sandbox
	// terminating counts the members on their way out, this pass's deletions included.
	terminating int
	// stale are the members that stay although made from another template (OnReplenish keeps
	// them); nil when there are none.
	stale map[*agentsv1beta1.Sandbox]bool
	// replacingStale counts the stale members this pass deletes, to be replaced.
	replacingStale int
}

// judge goes through the pool's members by name: orphans are taken in (or deleted when stale),
// stale members go under Recreate, members not Ready after the grace period go unless their Pod
// cannot be scheduled (then they are held).
func (p *PoolPlan) judge(pool *extv1beta1.SandboxWarmPool, found PoolFound, t *extv1beta1.SandboxTemplate, hashes PoolHashes, now time.Time, opts Options) judged {
	j := judged{terminating: found.InFlightDeletes}
	recreate := updateStrategy(pool) == extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType
	member := poolMemberOf(pool, NameHash(pool.Name))
	for _, sb := range sortedByName(found.Sandboxes) {
		if !member(sb) {
			continue
		}
		if sb.DeletionTimestamp != nil {
			j.terminating++
			continue
		}
		orphan := metav1.GetControllerOfNoCopy(sb) == nil
		stale := t != nil && isStale(sb, t, hashes, opts)
		reason := ""
		switch {
		case orphan && stale:
			reason = deleteStaleOrphan
		case orphan:
			// Only the pool's controller reference and launch-type label: upstream adopts with
			// an update of just these.
			p.Steps = append(p.Steps, Step{Action: ActionAdopt, Kind: agentsv1beta1.SandboxKind, Name: sb.Name, Intent: &Intent{Object: poolAdoption(pool, sb)}})
		case recreate && stale:
			reason = deleteStale
		}
		if reason == "" && !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) && !now.Before(sb.CreationTimestamp.Add(poolReadinessGrace)) {
			if unschedulable(sb) {
				j.held = append(j.held, sb)
			} else {
				reason = deleteStuck
			}
		}
		if reason != "" {
			p.Steps = append(p.Steps, poolDeletion(sb, reason))
			j.terminating++
			if reason == deleteStale || reason == deleteStaleOrphan {
				j.replacingStale++
			}
			continue
		}
		if stale {
			if j.stale == nil {
				j.stale = map[*agentsv1beta1.Sandbox]bool{}
			}
			j.stale[sb] = true
		}
		j.active = append(j.active, sb)
	}
	return j
}

// desired is the number of members the pool keeps: spec.replicas, at most the limit of members
// per pool (then LimitedTo says so).
func (p *PoolPlan) desired(pool *extv1beta1.SandboxWarmPool, opts Options) int32 {
	desired := replicas(pool)
	if limit := opts.maxPoolReplicas(); desired > limit {
		desired = limit
		p.LimitedTo = limit
	}
	return desired
}

// scale fills the pool to desired members (less what is terminating) with members of
// deterministic names, or deletes the least useful members above it, at most poolMaxBatch at a
// time; it returns the members that stay.
func (p *PoolPlan) scale(pool *extv1beta1.SandboxWarmPool, found PoolFound, active []*agentsv1beta1.Sandbox, terminating int, t *extv1beta1.SandboxTemplate, hashes PoolHashes, desired int, opts Options) []*agentsv1beta1.Sandbox {
	switch have := len(active) + found.InFlightCreates; {
	case have+terminating < desired && t != nil:
		p.create(pool, found, t, hashes, min(desired-have-terminating, poolMaxBatch), opts)
	case have > desired:
		excess := slices.Clone(active)
		slices.SortFunc(excess, scaleDownOrder)
		n := min(have-desired, len(excess), poolMaxBatch)
		for _, sb := range excess[:n] {
			p.Steps = append(p.Steps, poolDeletion(sb, deleteScaleDown))
		}
		active = excess[n:]
	}
	return active
}

// create creates n members of deterministic names, none of them a name taken.
func (p *PoolPlan) create(pool *extv1beta1.SandboxWarmPool, found PoolFound, t *extv1beta1.SandboxTemplate, hashes PoolHashes, n int, opts Options) {
	if n <= 0 {
		return
	}
	for _, name := range PoolMemberNames(pool.Namespace, pool.Name, n, found.Taken) {
		// Create only: a name the cache did not show as taken is never applied over (it could
		// be a member a claim has just adopted). Created in slow-start batches, as upstream
		// creates members: a failing API server sees one request, not hundreds.
		e := normalEvent("Created", fmt.Sprintf("Created Sandbox %q", name))
		s := createStep(agentsv1beta1.SandboxKind, PoolSandbox(pool, t, name, hashes, opts), &e)
		s.OnConflict, s.Concurrent = conflictSkip, true
		p.Steps = append(p.Steps, s)
	}
}

// roll is a RollingUpdate's pass while stale members remain, a Deployment's rolling update with
// members for Pods and the stale members for the old ReplicaSets (rolloutRolling), both
// directions in one pass:
//
//   - Stale members go least useful first (scaleDownOrder: not Ready, then newest): one that is
//     not Ready whenever (it serves no claim; a Deployment cleans up unhealthy old Pods first),
//     a Ready one only while at least desired-MaxUnavailable Ready members stay. Updated members
//     above desired (spec.replicas lowered during the rollout) go the same way, after them.
//   - Updated members are created up to desired, and all members up to desired+MaxSurge,
//     counting those on their way out (this pass's deletions too) as the pool counts them when it
//     fills: a retired member is replaced once it is gone, and a surge never runs past the
//     bound while members terminate.
//
// So a rollout whose new members never become Ready stops at the bound: the stale Ready members
// it keeps are never fewer than desired-MaxUnavailable (nor fewer than there were). Which stale
// member is stale is isStale's decision, so a template changed again mid-rollout makes the
// members of every older template stale alike, and the rollout goes on from where it is.
// Members a claim adopted are no longer the pool's and are not seen here; a deletion carries the
// member's resourceVersion, so one adopted meanwhile is not deleted from under its claim.
func (p *PoolPlan) roll(pool *extv1beta1.SandboxWarmPool, found PoolFound, j *judged, t *extv1beta1.SandboxTemplate, hashes PoolHashes, desired int, b rollingBounds, opts Options) []*agentsv1beta1.Sandbox {
	var updated, stale []*agentsv1beta1.Sandbox
	ready := 0
	for _, sb := range j.active {
		if j.stale[sb] {
			stale = append(stale, sb)
		} else {
			updated = append(updated, sb)
		}
		if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
			ready++
		}
	}
	budget := ready - max(desired-b.MaxUnavailable, 0) // Ready members this pass may delete
	batch := poolMaxBatch
	// retire deletes up to n of members, least useful first, within the budget and the batch;
	// it returns the members that stay and how many go.
	retire := func(members []*agentsv1beta1.Sandbox, n int, reason string) ([]*agentsv1beta1.Sandbox, int) {
		members = slices.Clone(members)
		slices.SortFunc(members, scaleDownOrder)
		gone := 0
		for gone < n && gone < len(members) && batch > 0 {
			sb := members[gone]
			if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
				if budget <= 0 {
					break // the rest are Ready too: scaleDownOrder puts the not Ready first
				}
				budget--
			}
			p.Steps = append(p.Steps, poolDeletion(sb, reason))
			gone++
			batch--
		}
		return members[gone:], gone
	}
	stale, retired := retire(stale, len(stale), deleteStale)
	updated, scaledDown := retire(updated, len(updated)+found.InFlightCreates-desired, deleteScaleDown)
	j.replacingStale += retired
	terminating := j.terminating + retired + scaledDown
	have := len(updated) + found.InFlightCreates
	p.create(pool, found, t, hashes, min(desired-have, desired+b.MaxSurge-have-len(stale)-terminating, poolMaxBatch), opts)
	return append(updated, stale...)
}

// poolDeletion deletes a member on the version found: a member a claim adopted meanwhile is not
// deleted from under it (the conflict leaves it to the next pass, which sees the adoption).
func poolDeletion(sb *agentsv1beta1.Sandbox, reason string) Step {
	e := normalEvent("Deleted", fmt.Sprintf("Deleted Sandbox %q (%s)", sb.Name, reason))
	s := deleteStep(agentsv1beta1.SandboxKind, sb, &e)
	s.Reason, s.Precondition.ResourceVersion = reason, sb.ResourceVersion
	return s
}

// wait sets when the members kept wait on time: while they are not Ready, until their grace
// ends, or for the next look at one that cannot be scheduled.
func (p *PoolPlan) wait(active []*agentsv1beta1.Sandbox, now time.Time) {
	for _, sb := range active {
		if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
			continue
		}
		if deadline := sb.CreationTimestamp.Add(poolReadinessGrace); now.Before(deadline) {
			p.requeue(deadline.Sub(now))
		} else {
			p.requeue(poolUnschedulableRecheck)
		}
	}
}

// warn says what keeps the pool from progressing: a spec.replicas over the limit, while the pool
// grows to the limit (not on every pass after), RollingUpdate bounds the CRD would refuse, and a
// held member (upstream's WarmPoolNotProgressing).
func (p *PoolPlan) warn(pool *extv1beta1.SandboxWarmPool, held []*agentsv1beta1.Sandbox, invalid error) {
	if p.LimitedTo > 0 && pool.Status.Replicas < p.LimitedTo {
		p.Events = append(p.Events, warningEvent("ReplicasOverLimit", fmt.Sprintf("spec.replicas %d is more than the limit of %d members per pool; kept at the limit (raise it with the render config's spec.maxPoolReplicas)", replicas(pool), p.LimitedTo)))
	}
	if invalid != nil {
		// Only a pool the CRD did not check gets here (an older CRD, a Go client's object).
		p.Events = append(p.Events, warningEvent("InvalidUpdateStrategy", fmt.Sprintf("%v; no stale member is replaced until it is fixed", invalid)))
	}
	if len(held) > 0 {
		p.Events = append(p.Events, warningEvent("WarmPoolNotProgressing", fmt.Sprintf("Sandbox %q is not Ready after %v and its Pod cannot be scheduled; kept", held[0].Name, poolReadinessGrace)))
	}
}

// scaleDownOrder puts the least useful members first: not Ready before Ready, then the newest,
// ties by name (upstream's order has ties; ours is deterministic).
func scaleDownOrder(a, b *agentsv1beta1.Sandbox) int {
	ra := meta.IsStatusConditionTrue(a.Status.Conditions, agentsv1beta1.ConditionReady)
	rb := meta.IsStatusConditionTrue(b.Status.Conditions, agentsv1beta1.ConditionReady)
	if ra != rb {
		if ra {
			return 1
		}
		return -1
	}
	return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
}

// unschedulable reports whether a Sandbox's Pod cannot be scheduled.
func unschedulable(sb *agentsv1beta1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionPodScheduled)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Unschedulable"
}

// poolAdoption is the intent that takes an orphan into a pool: the pool's controller reference
// and launch-type warm, nothing else (upstream adopts with an update of just these).
func poolAdoption(pool *extv1beta1.SandboxWarmPool, sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	return &agentsv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: sb.Name, Namespace: sb.Namespace,
			Labels:          map[string]string{agentsv1beta1.SandboxLaunchTypeLabel: agentsv1beta1.SandboxLaunchTypeWarm},
			OwnerReferences: controllerRef(extv1beta1.GroupVersion, extv1beta1.SandboxWarmPoolKind, pool),
		},
	}
}
