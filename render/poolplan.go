package render

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// Pool pass limits, upstream's defaults.
const (
	// PoolReadinessGrace is how long a member may stay not Ready before it is replaced
	// (--sandbox-warm-pool-readiness-grace-period).
	PoolReadinessGrace = 5 * time.Minute
	// PoolMaxBatch caps the members one pass creates or deletes (--sandbox-warm-pool-max-batch-size).
	PoolMaxBatch = 300
	// poolUnschedulableRecheck is how often a held, unschedulable member is looked at again.
	poolUnschedulableRecheck = time.Minute
)

// Why a pool deletes a member.
const (
	DeleteStaleOrphan = "StaleOrphan"
	DeleteStale       = "Stale"
	DeleteStuck       = "NotReadyAfterGrace"
	DeleteScaleDown   = "ScaleDown"
)

// PoolDeletion is a member a pool pass deletes, and why.
type PoolDeletion struct {
	Sandbox *agentsv1beta1.Sandbox
	Reason  string
}

// PoolObservation is what a controller knows about a pool when it plans a pass.
type PoolObservation struct {
	// Template is the pool's template, nil when it does not exist.
	Template *extv1beta1.SandboxTemplate
	// Sandboxes are the Sandboxes of the pool's namespace that carry its warm-pool label.
	Sandboxes []*agentsv1beta1.Sandbox
	// Taken are the names of every Sandbox of the namespace; new members never reuse one.
	Taken map[string]bool
	// InFlight counts members created or deleted by earlier passes that the observation does not
	// show yet: creates count as members, deletes as terminating members.
	InFlightCreates, InFlightDeletes int
}

// PoolPlan is one pass of a pool: members to create, orphans to take in, members to delete, the
// status, and when to look again.
type PoolPlan struct {
	Create []*agentsv1beta1.Sandbox
	// Adopt are orphans (no controller) the pool takes in: the intent carries only the pool's
	// controller reference and launch-type label.
	Adopt  []*agentsv1beta1.Sandbox
	Delete []PoolDeletion
	Status extv1beta1.SandboxWarmPoolStatus
	// Held are not-Ready members past the grace period kept because their Pod cannot be
	// scheduled (upstream's WarmPoolNotProgressing).
	Held []*agentsv1beta1.Sandbox
	// LimitedTo is Options.MaxPoolReplicas when spec.replicas asks for more: the pool is kept at
	// that limit (the render refuses such a pool; a controller cannot refuse an object that
	// already exists, so it says so instead). Zero when the pool is within the limit.
	LimitedTo int32
	// RequeueAfter is the earliest grace deadline of a not-Ready member, or the recheck of a held
	// one; zero when nothing waits on time.
	RequeueAfter time.Duration
}

// PlanPool computes a pool pass as upstream's warm-pool controller does: orphans with the
// pool's label are taken in (or deleted when stale), stale members go under Recreate, members not
// Ready after the grace period are replaced (unless unschedulable), then the pool is filled to
// spec.replicas with deterministic names or scaled down (not-Ready members first, then newest
// first, ties by name), at most PoolMaxBatch at a time. With no template nothing is created and
// nothing is judged stale. Members another object controls are not the pool's.
func PlanPool(pool *extv1beta1.SandboxWarmPool, obs PoolObservation, now time.Time, opts Options) PoolPlan {
	var plan PoolPlan
	t := obs.Template
	var hashes PoolHashes
	haveTemplate := t != nil
	if haveTemplate {
		var err error
		if hashes, err = TemplateHashes(t); err != nil {
			haveTemplate = false
		}
	}
	recreate := UpdateStrategy(pool) == extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType

	var active []*agentsv1beta1.Sandbox
	terminating := obs.InFlightDeletes
	for _, sb := range sortedByName(obs.Sandboxes) {
		if !PoolMember(pool, sb) {
			continue
		}
		if sb.DeletionTimestamp != nil {
			terminating++
			continue
		}
		orphan := metav1.GetControllerOfNoCopy(sb) == nil
		switch {
		case orphan && haveTemplate && IsStale(sb, t, hashes, opts):
			plan.Delete = append(plan.Delete, PoolDeletion{sb, DeleteStaleOrphan})
			terminating++
			continue
		case orphan:
			plan.Adopt = append(plan.Adopt, poolAdoption(pool, sb))
		case recreate && haveTemplate && IsStale(sb, t, hashes, opts):
			plan.Delete = append(plan.Delete, PoolDeletion{sb, DeleteStale})
			terminating++
			continue
		}
		if !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
			deadline := sb.CreationTimestamp.Add(PoolReadinessGrace)
			switch {
			case now.Before(deadline):
			case unschedulable(sb):
				plan.Held = append(plan.Held, sb)
			default:
				plan.Delete = append(plan.Delete, PoolDeletion{sb, DeleteStuck})
				terminating++
				continue
			}
		}
		active = append(active, sb)
	}

	desired := int(Replicas(pool))
	if limit := int(opts.maxPoolReplicas()); desired > limit {
		desired = limit
		plan.LimitedTo = int32(limit)
	}
	switch have := len(active) + obs.InFlightCreates; {
	case have+terminating < desired && haveTemplate:
		n := min(desired-have-terminating, PoolMaxBatch)
		for _, name := range PoolMemberNames(pool.Namespace, pool.Name, n, obs.Taken) {
			plan.Create = append(plan.Create, PoolSandbox(pool, t, name, hashes, opts))
		}
	case have > desired:
		excess := slices.Clone(active)
		slices.SortFunc(excess, scaleDownOrder)
		n := min(have-desired, len(excess), PoolMaxBatch)
		for _, sb := range excess[:n] {
			plan.Delete = append(plan.Delete, PoolDeletion{sb, DeleteScaleDown})
		}
		active = excess[n:]
	}
	// The members kept wait on time only while they are not Ready: until their grace ends, or
	// for the next look at one that cannot be scheduled.
	for _, sb := range active {
		if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
			continue
		}
		if deadline := sb.CreationTimestamp.Add(PoolReadinessGrace); now.Before(deadline) {
			plan.requeue(deadline.Sub(now))
		} else {
			plan.requeue(poolUnschedulableRecheck)
		}
	}
	plan.Status = PoolStatus(pool, active)
	return plan
}

func (p *PoolPlan) requeue(d time.Duration) {
	if p.RequeueAfter == 0 || d < p.RequeueAfter {
		p.RequeueAfter = d
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

// PoolStatusNeedsWrite reports whether next differs from the pool's status.
func PoolStatusNeedsWrite(cur, next *extv1beta1.SandboxWarmPoolStatus) bool {
	return *cur != *next
}
