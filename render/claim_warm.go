package render

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// warmWait is how long a young claim waits for a pool member that has no pod IP yet before it
// starts cold, as upstream waits: at most 2 s from the claim's creation, looking again every
// 500 ms.
const (
	warmWait     = 2 * time.Second
	warmWaitPoll = 500 * time.Millisecond
)

// warmCandidates are the pool members a claim may adopt, in the order to try them, and how many
// members could become candidates soon (no pod IP yet).
type warmCandidates struct {
	// Adoptable lists the Ready members first, then the networked ones (pod IPs but not Ready),
	// as upstream prefers a Ready member and falls back to the first networked one.
	Adoptable []*agentsv1beta1.Sandbox
	// Pending counts the members without pod IPs.
	Pending int
}

// adoptable reports whether a Sandbox is a pool member a claim of that pool can adopt, as
// upstream's candidate queue decides: not being deleted, carrying the warm-pool and template-ref
// hash labels, and controlled by the named SandboxWarmPool (any version of its group).
func adoptable(sb *agentsv1beta1.Sandbox, namespace, pool string) bool {
	if sb.Namespace != namespace || sb.DeletionTimestamp != nil {
		return false
	}
	if _, ok := sb.Labels[agentsv1beta1.SandboxWarmPoolLabel]; !ok {
		return false
	}
	if _, ok := sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel]; !ok {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(sb)
	if ref == nil {
		return false
	}
	group, kind := groupKindOf(ref)
	return group == extv1beta1.GroupVersion.Group && kind == extv1beta1.SandboxWarmPoolKind && ref.Name == pool
}

// claimRank is a claim's place among the claims of its pool that wait for a Sandbox (no
// status.sandbox.name yet), oldest first, ties by name. Workers that see the same claims and
// members give the k-th waiting claim the k-th Ready member, so claims arriving together do not
// race for the same member; a claim not among them ranks by a hash of its UID.
func claimRank(claim *extv1beta1.SandboxClaim, claims []*extv1beta1.SandboxClaim) int {
	waiting := make([]*extv1beta1.SandboxClaim, 0, len(claims))
	for _, c := range claims {
		if c.Namespace == claim.Namespace && c.Spec.WarmPoolRef.Name == claim.Spec.WarmPoolRef.Name &&
			c.Status.SandboxStatus.Name == "" && c.DeletionTimestamp == nil {
			waiting = append(waiting, c)
		}
	}
	slices.SortFunc(waiting, func(a, b *extv1beta1.SandboxClaim) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	if i := slices.IndexFunc(waiting, func(c *extv1beta1.SandboxClaim) bool { return c.UID == claim.UID && c.Name == claim.Name }); i >= 0 {
		return i
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(string(claim.UID) + "/" + claim.Name))
	return int(h.Sum32() >> 1)
}

// claimWarmCandidates orders the members of a claim's pool for adoption. Under a Recreate pool a
// stale member is never handed out; under a RollingUpdate pool (our extension) the Ready members
// made from the current template come before the stale Ready ones, so claims take what the
// rollout brings and the stale members it retires are the ones nobody took. Recreate and
// OnReplenish keep upstream's order: its queue does not tell stale members apart, and an
// OnReplenish pool is replaced as its members are claimed, oldest (so stale) first. Within each
// group members go oldest first (a FIFO, like upstream's queue; arrival is the order a
// controller's informer listed them, see ClaimFound.Arrival), and the Ready members start at the
// claim's rank (claimRank), so claims arriving together try different members first instead of
// all racing for one.
func claimWarmCandidates(claim *extv1beta1.SandboxClaim, cp ClaimPool, members []*agentsv1beta1.Sandbox, rank int, arrival map[string]uint64, opts Options) warmCandidates {
	var out warmCandidates
	if cp.Pool == nil {
		return out
	}
	strategy := updateStrategy(cp.Pool)
	recreate := strategy == extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType && cp.Template != nil
	rolling := strategy == extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType && cp.Template != nil
	var hashes PoolHashes
	if recreate || rolling {
		var err error
		if hashes, err = TemplateHashes(cp.Template); err != nil {
			recreate, rolling = false, false
		}
	}
	stale := func(sb *agentsv1beta1.Sandbox) bool {
		return sb.Labels[agentsv1beta1.SandboxTemplateHashLabel] != hashes.Blueprint && isStale(sb, cp.Template, hashes, opts)
	}
	var ready, staleReady, networked []*agentsv1beta1.Sandbox
	for _, sb := range members {
		if !adoptable(sb, claim.Namespace, cp.Pool.Name) {
			continue
		}
		if recreate && stale(sb) {
			continue
		}
		switch {
		case len(sb.Status.PodIPs) == 0:
			out.Pending++
		case meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady):
			if rolling && stale(sb) {
				staleReady = append(staleReady, sb)
			} else {
				ready = append(ready, sb)
			}
		default:
			networked = append(networked, sb)
		}
	}
	// Upstream hands out the member its candidate queue holds first: a FIFO fed by its informer's
	// add events. creationTimestamp has one-second resolution, so members created in the same
	// second (a fresh pool, always) are told apart by the order an informer listed them
	// (arrival): a watch delivers events in resourceVersion order, which is the order of the
	// creates, and after a restart both controllers rebuild it from the same initial list. The
	// ordinal of a name in PoolMemberNames is not that order: members are created in parallel
	// batches. It decides only between members no informer listed (a render, which has none).
	order := memberOrder(claim.Namespace, cp.Pool.Name, len(ready)+len(staleReady)+len(networked))
	ready, networked = oldestFirst(ready, arrival, order), oldestFirst(networked, arrival, order)
	// The k-th waiting claim's first choice is the k-th of this order: claims arriving together
	// take the updated members first, then the stale ones.
	ready = append(ready, oldestFirst(staleReady, arrival, order)...)
	if len(ready) > 1 {
		k := rank % len(ready)
		ready = append(ready[k:], ready[:k]...)
	}
	out.Adoptable = append(ready, networked...)
	return out
}

// oldestFirst sorts members by creation, then by arrival (a member with none after those with
// one), then by their place in PoolMemberNames (order), then by name. Each member's arrival is
// looked up once, not on every comparison; its place in PoolMemberNames only when creation and
// arrival tie, which among the members a controller's informer listed never happens (each has an
// arrival of its own), so a claim pass on a pool of a thousand does not look up a thousand names.
func oldestFirst(members []*agentsv1beta1.Sandbox, arrival map[string]uint64, order func(string) int) []*agentsv1beta1.Sandbox {
	type keyed struct {
		sb      *agentsv1beta1.Sandbox
		arrival uint64
	}
	ks := make([]keyed, len(members))
	for i, m := range members {
		a, ok := arrival[m.Name]
		if !ok {
			a = math.MaxUint64
		}
		ks[i] = keyed{m, a}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := a.sb.CreationTimestamp.Compare(b.sb.CreationTimestamp.Time); c != 0 {
			return c
		}
		if c := cmp.Compare(a.arrival, b.arrival); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(order(a.sb.Name), order(b.sb.Name)), strings.Compare(a.sb.Name, b.sb.Name))
	})
	for i, k := range ks {
		members[i] = k.sb
	}
	return members
}

// claimWarmWait is how long a claim should wait before looking at its pool again instead of
// starting cold: only when no member is adoptable yet, some are about to be (no pod IP yet), and
// the claim is younger than warmWait. Zero means start cold now.
func claimWarmWait(claim *extv1beta1.SandboxClaim, c warmCandidates, now time.Time) time.Duration {
	if len(c.Adoptable) > 0 || c.Pending == 0 {
		return 0
	}
	left := claim.CreationTimestamp.Add(warmWait).Sub(now)
	if left <= 0 {
		return 0
	}
	return min(left, warmWaitPoll)
}

// claimSandboxMetadata is the metadata a claimed Sandbox carries on every later pass, as
// upstream's re-sync computes it: the claim's identity labels and the current template's
// template-ref hash on the Sandbox, and claimPodMetadata as its pod template's metadata. It
// returns a copy of sb with those set; the spec is otherwise untouched (template spec edits
// never reach a claimed Sandbox). With no template (nil) the Sandbox is returned unchanged.
func claimSandboxMetadata(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate) (*agentsv1beta1.Sandbox, *ClaimError) {
	out := sb.DeepCopy()
	out.TypeMeta = sandboxTypeMeta // a Sandbox read from a cache has none; an intent carries it
	if t == nil {
		return out, nil
	}
	refHash := NameHash(t.Name)
	out.Labels = claimIdentityLabels(out.Labels, claim)
	out.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = refHash
	md, err := claimPodMetadata(claim, t, refHash)
	if err != nil {
		return nil, err
	}
	out.Spec.PodTemplate.ObjectMeta = md
	return out, nil
}

// claimStatusHold is how long a claim's status write may wait: a claim whose Sandbox is starting
// normally (not Ready yet, no error) has nothing a client acts on until it is Ready, so within
// startupWindow of the claim's creation the not-ready status is not written; the Ready one comes
// soon after and is the only write. A Sandbox that reports why it is stuck (podStuckCause) is no
// normal start: its claim says so at once. Zero means write now.
func claimStatusHold(claim *extv1beta1.SandboxClaim, next *extv1beta1.SandboxClaimStatus, now time.Time) time.Duration {
	ready := meta.FindStatusCondition(next.Conditions, agentsv1beta1.ConditionReady)
	if ready == nil || ready.Status == metav1.ConditionTrue {
		return 0
	}
	switch ready.Reason {
	case reasonSandboxNotReady, agentsv1beta1.ReasonDependenciesNotReady:
	default:
		return 0
	}
	if sandboxReportsStuck(ready.Message) {
		return 0
	}
	if meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionReady) != nil {
		return 0
	}
	if hold := claim.CreationTimestamp.Add(startupWindow).Sub(now); hold > 0 {
		return hold
	}
	return 0
}

// claimStatusChanged reports whether next differs from the claim's status (semantically: a
// condition keeps its transition time while its status holds, so an unchanged claim compares
// equal).
func claimStatusChanged(cur, next *extv1beta1.SandboxClaimStatus) bool {
	return !equality.Semantic.DeepEqual(cur, next)
}

// claimTriesWarm reports whether a claim without a Sandbox looks at its pool's members before
// starting cold, given the error of its cold path (ClaimSandbox), as upstream decides: not with
// env or volume claim templates (claimNeedsColdStart), only from a pool that exists (v1alpha1's
// synthetic shadow pool has no members), and not when the cold path failed, except for a missing
// template, which a warm adoption tolerates unless the claim adds pod metadata (that needs the
// template's metadata to merge with).
func claimTriesWarm(claim *extv1beta1.SandboxClaim, cp ClaimPool, cold *ClaimError) bool {
	if claimNeedsColdStart(claim) || cp.Pool == nil || cp.Pool.UID == "" {
		return false
	}
	if cold == nil {
		return true
	}
	md := claim.Spec.AdditionalPodMetadata
	return cold.Reason == ReasonTemplateNotFound && len(md.Labels)+len(md.Annotations) == 0
}

// claimCanTakeOver reports whether a claim's cold path may apply over an existing Sandbox of
// the claim's name: only over one no controller owns that the render made from a claim (an
// earlier GitOps sync of the same claim, which carries no owner reference because Git has no
// UIDs). Anything else is claimNotControlledError.
func claimCanTakeOver(existing *agentsv1beta1.Sandbox) bool {
	return metav1.GetControllerOfNoCopy(existing) == nil && existing.Labels[agentsv1beta1.SandboxLaunchTypeLabel] == agentsv1beta1.SandboxLaunchTypeCold
}

// claimOwnsRender reports whether named, the Sandbox found under the claim's Sandbox name, is
// the claim's own render that the claim takes over (claimCanTakeOver) instead of adopting a warm
// member.
func claimOwnsRender(claim *extv1beta1.SandboxClaim, named *agentsv1beta1.Sandbox) bool {
	return named != nil && named.Name == claimSandboxName(claim) && claimCanTakeOver(named)
}

// claimNotControlledError is upstream's error for a claim whose name another Sandbox has: a
// ReconcilerError (retried), on the claim's name.
func claimNotControlledError(claim *extv1beta1.SandboxClaim) *ClaimError {
	return &ClaimError{Reason: ReasonReconcilerError, Field: field.NewPath("metadata", "name"), Value: claim.Name,
		Err: fmt.Sprintf("sandbox %q is not controlled by claim %q. Please use a different claim name or delete the sandbox manually", claim.Name, claim.Name)}
}

// memberOrder ranks a pool's member names by the order PoolMemberNames gives them (ordinal, then
// attempt), for the first ordinals a pool of about n members uses; any other name ranks after.
func memberOrder(namespace, pool string, n int) func(name string) int {
	limit := 2*n + 8 // replaced members reuse the lowest free ordinals; a few are taken by others
	table := memberRanks(namespace, pool, limit)
	return func(name string) int {
		if r, ok := table[name]; ok && r < limit*memberAttempts {
			return r
		}
		return limit * memberAttempts
	}
}

// memberAttempts is how many attempts of each ordinal memberOrder ranks.
const memberAttempts = 3

// rankTables memoises memberRanks per namespace and pool: a claim pass ranks its pool's members,
// and the names of a pool of a thousand are three thousand hashes, which every pass of a burst
// of claims would compute again. A table only ever grows, and the ranks of its names do not
// depend on its size, so the memo changes no result.
var rankTables sync.Map // "namespace/pool" → *rankTable

type rankTable struct {
	limit int
	rank  map[string]int
}

// memberRanks is each name PoolMemberName gives the first limit ordinals of a pool (or more),
// with its rank: ordinal*memberAttempts + attempt, the first it has.
func memberRanks(namespace, pool string, limit int) map[string]int {
	key := namespace + "/" + pool
	if t, ok := rankTables.Load(key); ok && t.(*rankTable).limit >= limit {
		return t.(*rankTable).rank
	}
	if t, ok := rankTables.Load(key); ok {
		limit = max(limit, 2*t.(*rankTable).limit)
	}
	rank := make(map[string]int, limit*memberAttempts)
	for ordinal := range limit {
		for attempt := range memberAttempts {
			name := PoolMemberName(namespace, pool, ordinal, attempt)
			if _, seen := rank[name]; !seen {
				rank[name] = ordinal*memberAttempts + attempt
			}
		}
	}
	rankTables.Store(key, &rankTable{limit: limit, rank: rank})
	return rank
}
