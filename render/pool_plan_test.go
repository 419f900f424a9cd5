package render

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

var planNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func poolTemplate(image string) *extv1beta1.SandboxTemplate {
	t := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "python", Namespace: "ns"}}
	t.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "python", Image: image}}
	return t
}

func testPool(replicas int32, strategy extv1beta1.SandboxWarmPoolUpdateStrategyType) *extv1beta1.SandboxWarmPool {
	p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid", Generation: 3}}
	p.Spec.Replicas = ptr.To(replicas)
	p.Spec.TemplateRef.Name = "python"
	if strategy != "" {
		p.Spec.UpdateStrategy = &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: strategy}
	}
	return p
}

// member is a pool member made from tpl, created age ago, Ready or not.
type memberOpt func(*agentsv1beta1.Sandbox)

func member(p *extv1beta1.SandboxWarmPool, tpl *extv1beta1.SandboxTemplate, name string, age time.Duration, opts ...memberOpt) *agentsv1beta1.Sandbox {
	h, err := TemplateHashes(tpl)
	if err != nil {
		panic(err)
	}
	sb := PoolSandbox(p, tpl, name, h, Options{})
	sb.CreationTimestamp = metav1.NewTime(planNow.Add(-age))
	sb.UID, sb.ResourceVersion = k8stypes.UID("uid-"+name), "7"
	for _, o := range opts {
		o(sb)
	}
	return sb
}

func ready(sb *agentsv1beta1.Sandbox) {
	sb.Status.Conditions = append(sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonDependenciesReady})
	sb.Status.PodIPs = []string{"10.0.0.1"}
}

func networked(sb *agentsv1beta1.Sandbox) { sb.Status.PodIPs = []string{"10.0.0.2"} }

func orphaned(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences = nil }

func deleting(sb *agentsv1beta1.Sandbox) { sb.DeletionTimestamp = ptr.To(metav1.NewTime(planNow)) }

func unschedulableMember(sb *agentsv1beta1.Sandbox) {
	sb.Status.Conditions = append(sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionPodScheduled, Status: metav1.ConditionFalse, Reason: "Unschedulable"})
}

func TestPlanPool(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	newTpl := poolTemplate("python:3.13")
	onReplenish := testPool(2, "")
	recreate := testPool(2, extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType)
	names := PoolMemberNames("ns", "pool", 4, nil)
	type summary struct {
		LimitedTo    int32
		Create       []string
		Adopt        []string
		Delete       []string
		Events       []string
		Status       extv1beta1.SandboxWarmPoolStatus
		WriteStatus  bool
		RequeueAfter time.Duration
	}
	// status is the status of replicas members made from the current template, ready of them
	// Ready; the conditions are TestPoolRolloutStatus's.
	status := func(replicas, ready int32) extv1beta1.SandboxWarmPoolStatus {
		return extv1beta1.SandboxWarmPoolStatus{Replicas: replicas, ReadyReplicas: ready, Selector: agentsv1beta1.SandboxWarmPoolLabel + "=" + NameHash("pool"), ObservedGeneration: 3,
			UpdatedReplicas: replicas, UpdatedReadyReplicas: ready}
	}
	stale := func(st extv1beta1.SandboxWarmPoolStatus, n int32) extv1beta1.SandboxWarmPoolStatus {
		st.UpdatedReplicas -= n
		st.UpdatedReadyReplicas -= n
		return st
	}
	cases := map[string]struct {
		pool *extv1beta1.SandboxWarmPool
		obs  PoolFound
		opts Options
		want summary
	}{
		"empty pool fills with the render's names": {
			pool: onReplenish, obs: PoolFound{Template: tpl},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Create: names[:2], Status: status(0, 0)},
		},
		"names in use are skipped": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Taken: map[string]bool{names[0]: true}},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Create: []string{PoolMemberName("ns", "pool", 0, 1), names[1]}, Status: status(0, 0)},
		},
		"in-flight creates are not made twice": {
			pool: onReplenish, obs: PoolFound{Template: tpl, InFlightCreates: 2},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Status: status(0, 0)},
		},
		"no template, nothing created": {
			pool: onReplenish, obs: PoolFound{},
			want: summary{WriteStatus: true, Status: status(0, 0)},
		},
		"no template, no member counted as made from it": {
			pool: onReplenish, obs: PoolFound{Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], time.Minute, ready)}},
			want: summary{WriteStatus: true, Status: stale(status(2, 2), 2)},
		},
		"full and Ready": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], time.Minute, ready)}},
			want: summary{WriteStatus: true, Status: status(2, 2)},
		},
		"a starting member is waited for until its grace ends": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], time.Minute)}},
			want: summary{WriteStatus: true, Status: status(2, 1), RequeueAfter: 4 * time.Minute},
		},
		// The deleted member counts against capacity until it is gone (upstream's terminating
		// members); its replacement comes in the pass after.
		"a member not Ready after the grace is replaced": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Taken: map[string]bool{names[0]: true, names[1]: true}, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], 6*time.Minute)}},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Delete: []string{names[1] + " " + deleteStuck}, Status: status(1, 1)},
		},
		"an unschedulable member is held": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], 6*time.Minute, unschedulableMember)}},
			want: summary{WriteStatus: true, Events: []string{"Warning WarmPoolNotProgressing"}, Status: status(2, 1), RequeueAfter: time.Minute},
		},
		"scale down: not Ready first, then newest": {
			pool: testPool(1, ""), obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], 3*time.Minute, ready), member(onReplenish, tpl, names[1], 2*time.Minute, ready),
				member(onReplenish, tpl, names[2], 4*time.Minute, networked)}},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Delete: []string{names[2] + " " + deleteScaleDown, names[1] + " " + deleteScaleDown}, Status: status(1, 1)},
		},
		"deleting members count against capacity": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], time.Minute, ready, deleting)}},
			want: summary{WriteStatus: true, Status: status(1, 1)},
		},
		"OnReplenish keeps stale members": {
			pool: onReplenish, obs: PoolFound{Template: newTpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], time.Minute, ready)}},
			want: summary{WriteStatus: true, Status: stale(status(2, 2), 2)},
		},
		"a member past its progress deadline brings no requeue of its own": {
			pool: func() *extv1beta1.SandboxWarmPool {
				p := testPool(2, "")
				p.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
				return p
			}(), obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], 2*time.Minute)}},
			want: summary{WriteStatus: true, Status: status(2, 1), RequeueAfter: 3 * time.Minute},
		},
		"the pass comes back a second after a member's progress deadline": {
			pool: func() *extv1beta1.SandboxWarmPool {
				p := testPool(2, "")
				p.Spec.ProgressDeadlineSeconds = ptr.To[int32](90)
				return p
			}(), obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready), member(onReplenish, tpl, names[1], time.Minute)}},
			want: summary{WriteStatus: true, Status: status(2, 1), RequeueAfter: 31 * time.Second},
		},
		"Recreate replaces stale members": {
			pool: recreate, obs: PoolFound{Template: newTpl, Taken: map[string]bool{names[0]: true, names[1]: true}, Sandboxes: []*agentsv1beta1.Sandbox{
				member(recreate, tpl, names[0], time.Minute, ready), member(recreate, tpl, names[1], time.Minute, ready)}},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Delete: []string{names[1] + " " + deleteStale, names[0] + " " + deleteStale}, Status: status(0, 0)}, // by name
		},
		"orphans are taken in, stale orphans deleted": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Taken: map[string]bool{names[0]: true, "stale": true}, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready, orphaned), member(onReplenish, newTpl, "stale", time.Minute, ready, orphaned)}},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Adopt: []string{names[0]}, Delete: []string{"stale " + deleteStaleOrphan}, Status: status(1, 1)},
		},
		"over the per-pool limit: kept at the limit, and said": {
			pool: testPool(3, ""), obs: PoolFound{Template: tpl},
			opts: Options{MaxPoolReplicas: 2},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, LimitedTo: 2, Create: names[:2], Events: []string{"Warning ReplicasOverLimit"}, Status: status(0, 0)},
		},
		"members of another owner are not the pool's": {
			pool: onReplenish, obs: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, names[0], time.Minute, ready, func(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences[0].Name = "other" })}},
			want: summary{RequeueAfter: PoolWriteRecheck, WriteStatus: true, Create: names[:2], Status: status(0, 0)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for run := range 2 {
				plan := PlanPool(tc.pool, tc.obs, planNow, tc.opts)
				got := summary{LimitedTo: plan.LimitedTo}
				for _, s := range plan.Steps {
					var sb *agentsv1beta1.Sandbox
					if s.Intent != nil {
						sb, _ = s.Intent.Object.(*agentsv1beta1.Sandbox)
					}
					switch s.Action {
					case ActionCreate:
						got.Create = append(got.Create, s.Name)
						if s.Precondition == nil || !s.Precondition.CreateOnly {
							t.Errorf("create of %s is not create-only: %+v", s.Name, s.Precondition)
						}
					case ActionAdopt:
						got.Adopt = append(got.Adopt, s.Name)
						if ref := metav1.GetControllerOf(sb); ref == nil || ref.UID != tc.pool.UID || sb.Labels[agentsv1beta1.SandboxLaunchTypeLabel] != agentsv1beta1.SandboxLaunchTypeWarm {
							t.Errorf("adoption intent of %s: %+v %v", sb.Name, sb.OwnerReferences, sb.Labels)
						}
					case ActionDelete:
						got.Delete = append(got.Delete, fmt.Sprintf("%s %s", s.Name, s.Reason))
						if s.Precondition == nil || s.Precondition.ResourceVersion == "" || s.Precondition.UID == "" {
							t.Errorf("delete of %s without its version and UID: %+v", s.Name, s.Precondition)
						}
					}
				}
				for _, e := range plan.Events {
					got.Events = append(got.Events, e.Type+" "+e.Reason)
				}
				got.Status, got.WriteStatus, got.RequeueAfter = *plan.Status, plan.WriteStatus, plan.RequeueAfter.Duration
				got.Status.Conditions = nil // TestPoolRolloutStatus
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("run %d (-want +got):\n%s", run, diff)
				}
			}
		})
	}
}

func claimOn(pool string, uid string) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + uid, Namespace: "ns", UID: k8stypes.UID("uid-" + uid), CreationTimestamp: metav1.NewTime(planNow.Add(-time.Second))}}
	c.Spec.WarmPoolRef.Name = pool
	return c
}

func TestClaimWarmCandidates(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	newTpl := poolTemplate("python:3.13")
	pool := testPool(4, "")
	recreate := testPool(4, extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType)
	cases := map[string]struct {
		cp          ClaimPool
		members     []*agentsv1beta1.Sandbox
		wantReady   []string // in any rotation
		wantRest    []string
		wantPending int
	}{
		"Ready first, oldest first, then networked, pending counted": {
			cp: ClaimPool{Pool: pool, Template: tpl},
			members: []*agentsv1beta1.Sandbox{
				member(pool, tpl, "young", time.Minute, ready), member(pool, tpl, "old", 2*time.Minute, ready),
				member(pool, tpl, "net", 3*time.Minute, networked), member(pool, tpl, "starting", time.Second),
				member(pool, tpl, "gone", time.Minute, ready, deleting), member(pool, tpl, "orphan", time.Minute, ready, orphaned),
			},
			wantReady: []string{"old", "young"}, wantRest: []string{"net"}, wantPending: 1,
		},
		"Recreate refuses stale members": {
			cp:        ClaimPool{Pool: recreate, Template: newTpl},
			members:   []*agentsv1beta1.Sandbox{member(recreate, tpl, "stale", time.Minute, ready), member(recreate, newTpl, "fresh", time.Minute, ready)},
			wantReady: []string{"fresh"},
		},
		"OnReplenish hands out stale members": {
			cp:        ClaimPool{Pool: pool, Template: newTpl},
			members:   []*agentsv1beta1.Sandbox{member(pool, tpl, "stale", time.Minute, ready)},
			wantReady: []string{"stale"},
		},
		"no pool": {cp: ClaimPool{}, members: []*agentsv1beta1.Sandbox{member(pool, tpl, "x", time.Minute, ready)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := claimWarmCandidates(claimOn("pool", "1"), tc.cp, tc.members, 7, nil, Options{})
			var gotNames []string
			for _, sb := range got.Adoptable {
				gotNames = append(gotNames, sb.Name)
			}
			n := len(tc.wantReady)
			if len(gotNames) != n+len(tc.wantRest) {
				t.Fatalf("candidates %v, want a rotation of %v then %v", gotNames, tc.wantReady, tc.wantRest)
			}
			if !isRotation(gotNames[:n], tc.wantReady) {
				t.Errorf("Ready candidates %v, want a rotation of %v", gotNames[:n], tc.wantReady)
			}
			if diff := cmp.Diff(tc.wantRest, gotNames[n:], cmpEmpty); diff != "" {
				t.Errorf("networked candidates (-want +got):\n%s", diff)
			}
			if got.Pending != tc.wantPending {
				t.Errorf("pending %d, want %d", got.Pending, tc.wantPending)
			}
		})
	}
}

// TestClaimWarmCandidatesSpread: claims arriving together start at distinct Ready members, in
// the order they wait, whatever order they are listed in.
func TestClaimWarmCandidatesSpread(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	pool := testPool(5, "")
	var members []*agentsv1beta1.Sandbox
	for i := range 5 {
		members = append(members, member(pool, tpl, fmt.Sprintf("m%d", i), time.Minute, ready))
	}
	var claims []*extv1beta1.SandboxClaim
	for i := range 5 {
		claims = append(claims, claimOn("pool", fmt.Sprint(i)))
	}
	bound := claimOn("pool", "bound")
	bound.Status.SandboxStatus.Name = "m9"
	listed := append([]*extv1beta1.SandboxClaim{bound}, claims[4], claims[2], claims[0], claims[3], claims[1])
	var first []string
	for _, c := range claims {
		got := claimWarmCandidates(c, ClaimPool{Pool: pool, Template: tpl}, members, claimRank(c, listed), nil, Options{})
		first = append(first, got.Adoptable[0].Name)
	}
	if diff := cmp.Diff([]string{"m0", "m1", "m2", "m3", "m4"}, first); diff != "" {
		t.Errorf("first candidates (-want +got):\n%s", diff)
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal([]string(a), []string(b)) })

func isRotation(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	if len(want) == 0 {
		return true
	}
	for k := range want {
		ok := true
		for i := range want {
			if got[i] != want[(i+k)%len(want)] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func TestClaimWarmWait(t *testing.T) {
	young := claimOn("pool", "1") // 1 s old at planNow
	old := claimOn("pool", "2")
	old.CreationTimestamp = metav1.NewTime(planNow.Add(-3 * time.Second))
	someone := []*agentsv1beta1.Sandbox{{}}
	cases := map[string]struct {
		claim *extv1beta1.SandboxClaim
		c     warmCandidates
		want  time.Duration
	}{
		"adoptable: no wait":        {young, warmCandidates{Adoptable: someone, Pending: 1}, 0},
		"nothing pending: cold now": {young, warmCandidates{}, 0},
		"pending, young: poll":      {young, warmCandidates{Pending: 1}, warmWaitPoll},
		"pending, old: cold now":    {old, warmCandidates{Pending: 1}, 0},
		"pending, almost 2 s: the rest": {func() *extv1beta1.SandboxClaim {
			c := claimOn("pool", "3")
			c.CreationTimestamp = metav1.NewTime(planNow.Add(-1800 * time.Millisecond))
			return c
		}(), warmCandidates{Pending: 1}, 200 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := claimWarmWait(tc.claim, tc.c, planNow); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClaimStatusHold(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) extv1beta1.SandboxClaimStatus {
		return extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: status, Reason: reason}}}
	}
	young := claimOn("pool", "1")
	written := claimOn("pool", "2")
	written.Status = cond(metav1.ConditionFalse, reasonSandboxNotReady)
	old := claimOn("pool", "3")
	old.CreationTimestamp = metav1.NewTime(planNow.Add(-time.Minute))
	cases := map[string]struct {
		claim *extv1beta1.SandboxClaim
		next  extv1beta1.SandboxClaimStatus
		want  time.Duration
	}{
		"starting: held":               {young, cond(metav1.ConditionFalse, reasonSandboxNotReady), startupWindow - time.Second},
		"dependencies not ready: held": {young, cond(metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady), startupWindow - time.Second},
		"Ready: written":               {young, cond(metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady), 0},
		"an error: written":            {young, cond(metav1.ConditionFalse, ReasonTemplateNotFound), 0},
		"already has a status":         {written, cond(metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady), 0},
		"past the window":              {old, cond(metav1.ConditionFalse, reasonSandboxNotReady), 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := claimStatusHold(tc.claim, &tc.next, planNow); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClaimTriesWarm(t *testing.T) {
	pool := testPool(1, "")
	tpl := poolTemplate("python:3.12")
	missing := &ClaimError{Reason: ReasonTemplateNotFound}
	cases := map[string]struct {
		mutate func(*extv1beta1.SandboxClaim)
		cp     ClaimPool
		cold   *ClaimError
		want   bool
	}{
		"pool and template":    {cp: ClaimPool{Pool: pool, Template: tpl}, want: true},
		"env: cold":            {mutate: func(c *extv1beta1.SandboxClaim) { c.Spec.Env = []extv1beta1.EnvVar{{Name: "A", Value: ptr.To("b")}} }, cp: ClaimPool{Pool: pool, Template: tpl}},
		"no pool":              {cp: ClaimPool{}, cold: &ClaimError{Reason: ReasonWarmPoolNotFound}},
		"shadow pool (no UID)": {cp: ClaimPool{Pool: &extv1beta1.SandboxWarmPool{}, Template: tpl}},
		"template missing":     {cp: ClaimPool{Pool: pool}, cold: missing, want: true},
		"template missing, pod metadata to merge": {mutate: func(c *extv1beta1.SandboxClaim) {
			c.Spec.AdditionalPodMetadata.Annotations = map[string]string{"a": "b"}
		}, cp: ClaimPool{Pool: pool}, cold: missing},
		"invalid metadata": {cp: ClaimPool{Pool: pool, Template: tpl}, cold: &ClaimError{Reason: ReasonInvalidMetadata}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := claimOn("pool", "1")
			if tc.mutate != nil {
				tc.mutate(c)
			}
			if got := claimTriesWarm(c, tc.cp, tc.cold); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClaimCanTakeOver(t *testing.T) {
	pool := testPool(1, "")
	tpl := poolTemplate("python:3.12")
	claim := claimOn("pool", "1")
	rendered, cerr := ClaimSandbox(&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Namespace: "ns"}, Spec: claim.Spec}, ClaimPool{Pool: pool, Template: tpl}, Options{})
	if cerr != nil {
		t.Fatal(cerr)
	}
	owned, _ := ClaimSandbox(claim, ClaimPool{Pool: pool, Template: tpl}, Options{})
	cases := map[string]struct {
		sb   *agentsv1beta1.Sandbox
		want bool
	}{
		"the render's Sandbox of the claim, from Git": {rendered, true},
		"controlled by someone":                       {owned, false},
		"a user's own Sandbox":                        {&agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: claim.Name}}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := claimCanTakeOver(tc.sb); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	want := `sandbox "claim-1" is not controlled by claim "claim-1". Please use a different claim name or delete the sandbox manually`
	if e := claimNotControlledError(claim); e.Reason != ReasonReconcilerError || e.Err != want || e.Field.String() != "metadata.name" {
		t.Errorf("ClaimNotControlledError: %+v", e)
	}
}

func TestClaimErrorRetried(t *testing.T) {
	for reason, want := range map[string]bool{
		ReasonTemplateNotFound: true, ReasonWarmPoolNotFound: true, ReasonReconcilerError: true,
		ReasonInvalidMetadata: false, ReasonEnvVarsInjectionRejected: false, ReasonVolumeClaimTemplatesError: false,
	} {
		if got := (&ClaimError{Reason: reason}).Retried(); got != want {
			t.Errorf("%s: Retried() = %v, want %v", reason, got, want)
		}
	}
}

// TestShadowPoolName: the name a controller wakes claims by is the one ResolveClaim resolves to
// the template.
func TestShadowPoolName(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	c := claimOn(ShadowPoolName(tpl.Name), "1")
	if got := ResolveClaim(c, nil, []*extv1beta1.SandboxTemplate{tpl}).Template; got != tpl {
		t.Errorf("a claim on %q resolved to template %v, want %q", ShadowPoolName(tpl.Name), got, tpl.Name)
	}
}

// TestClaimWarmCandidatesArrival: members created in the same second go in the order the
// controller's informer listed them (upstream's queue order), whatever their ordinals and names;
// a member the informer has not listed goes after those it has; an older member still goes first.
func TestClaimWarmCandidatesArrival(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	pool := testPool(3, "")
	names := PoolMemberNames(pool.Namespace, pool.Name, 3, nil) // ordinals 0, 1, 2
	for name, tc := range map[string]struct {
		arrival map[string]uint64
		age     map[string]time.Duration // default a minute
		want    []string
	}{
		"created out of ordinal order": {
			arrival: map[string]uint64{names[2]: 7, names[0]: 8, names[1]: 9},
			want:    []string{names[2], names[0], names[1]},
		},
		"one not listed yet goes last": {
			arrival: map[string]uint64{names[1]: 3, names[2]: 4},
			want:    []string{names[1], names[2], names[0]},
		},
		"no informer: ordinal order": {
			want: []string{names[0], names[1], names[2]},
		},
		"an older member first, whatever its arrival": {
			arrival: map[string]uint64{names[2]: 1, names[0]: 2, names[1]: 3},
			age:     map[string]time.Duration{names[1]: time.Hour},
			want:    []string{names[1], names[2], names[0]},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var members []*agentsv1beta1.Sandbox
			for _, n := range []string{names[1], names[0], names[2]} { // listed in neither order
				age := time.Minute
				if a, ok := tc.age[n]; ok {
					age = a
				}
				members = append(members, member(pool, tpl, n, age, ready))
			}
			got := claimWarmCandidates(claimOn(pool.Name, "1"), ClaimPool{Pool: pool, Template: tpl}, members, 0, tc.arrival, Options{})
			var gotNames []string
			for _, sb := range got.Adoptable {
				gotNames = append(gotNames, sb.Name)
			}
			if diff := cmp.Diff(tc.want, gotNames); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClaimWarmCandidatesFirstCreated: with no informer's arrival order (a render), members
// created in the same second are ordered by the ordinal PoolMemberNames gave them, not by name:
// by name, one claim on a fresh pool of two took the second member whenever its name sorted
// first.
func TestClaimWarmCandidatesFirstCreated(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	pool := testPool(2, "")
	names := PoolMemberNames(pool.Namespace, pool.Name, 6, nil)
	// Two members made in one second whose names sort against their creation order.
	first, second := "", ""
	for i := 0; i < len(names) && first == ""; i++ {
		for j := i + 1; j < len(names); j++ {
			if names[j] < names[i] {
				first, second = names[i], names[j]
				break
			}
		}
	}
	if first == "" {
		t.Fatalf("no two of %v sort against their creation order", names)
	}
	for _, listed := range [][]string{{first, second}, {second, first}} {
		var members []*agentsv1beta1.Sandbox
		for _, n := range listed {
			members = append(members, member(pool, tpl, n, time.Minute, ready))
		}
		got := claimWarmCandidates(claimOn(pool.Name, "1"), ClaimPool{Pool: pool, Template: tpl}, members, 0, nil, Options{})
		var gotNames []string
		for _, sb := range got.Adoptable {
			gotNames = append(gotNames, sb.Name)
		}
		if diff := cmp.Diff([]string{first, second}, gotNames); diff != "" {
			t.Errorf("listed %v: candidates (-want +got):\n%s", listed, diff)
		}
	}
	// An older member still comes first, whatever its ordinal.
	members := []*agentsv1beta1.Sandbox{member(pool, tpl, first, time.Minute, ready), member(pool, tpl, second, time.Hour, ready)}
	got := claimWarmCandidates(claimOn(pool.Name, "1"), ClaimPool{Pool: pool, Template: tpl}, members, 0, nil, Options{})
	if got.Adoptable[0].Name != second {
		t.Errorf("the older member %s is not first: %s", second, got.Adoptable[0].Name)
	}
}

// TestPoolBackground: nobody waits on a pool's pass while a quarter of its replicas (at least one)
// is Ready: claims take only Ready members.
func TestPoolBackground(t *testing.T) {
	for name, tc := range map[string]struct {
		replicas, ready int32
		want            bool
	}{
		"QuarterReady":      {replicas: 8, ready: 2, want: true},
		"BelowQuarter":      {replicas: 8, ready: 1, want: false},
		"AllReady":          {replicas: 1050, ready: 1050, want: true},
		"UpstreamReserve":   {replicas: 1050, ready: 262, want: true},
		"UpstreamShort":     {replicas: 1050, ready: 261, want: false},
		"SmallNeedsOne":     {replicas: 3, ready: 0, want: false},
		"SmallOneIsEnough":  {replicas: 3, ready: 1, want: true},
		"EmptyPoolNeedsOne": {replicas: 0, ready: 0, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			st := extv1beta1.SandboxWarmPoolStatus{ReadyReplicas: tc.ready}
			if got := poolBackground(testPool(tc.replicas, ""), st); got != tc.want {
				t.Errorf("PoolBackground(replicas %d, ready %d) = %v, want %v", tc.replicas, tc.ready, got, tc.want)
			}
		})
	}
}

// TestPoolKeepsReserve: the reserve is counted on the pool's own Ready members among the
// Sandboxes given (not those a claim took, nor those being deleted), not on its status.
func TestPoolKeepsReserve(t *testing.T) {
	pool := testPool(8, "")
	pool.Status.ReadyReplicas = 8 // as last written: ignored
	ready := []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue}}
	sandbox := func(name string, owner string, isReady, deleting bool) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{agentsv1beta1.SandboxWarmPoolLabel: NameHash("pool")}}}
		if owner != "" {
			sb.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: "x", UID: k8stypes.UID(owner + "-uid"), Controller: ptr.To(true)}}
			if owner == extv1beta1.SandboxWarmPoolKind {
				sb.OwnerReferences[0].APIVersion = extv1beta1.GroupVersion.String()
				sb.OwnerReferences[0].Name, sb.OwnerReferences[0].UID = "pool", "pool-uid"
			}
		}
		if isReady {
			sb.Status.Conditions = ready
		}
		if deleting {
			sb.DeletionTimestamp = &metav1.Time{Time: planNow}
		}
		return sb
	}
	member := extv1beta1.SandboxWarmPoolKind
	for name, tc := range map[string]struct {
		sandboxes []*agentsv1beta1.Sandbox
		want      bool
	}{
		"None":                {want: false},
		"TwoReadyMembers":     {sandboxes: []*agentsv1beta1.Sandbox{sandbox("a", member, true, false), sandbox("b", member, true, false)}, want: true},
		"OneReadyOneStarting": {sandboxes: []*agentsv1beta1.Sandbox{sandbox("a", member, true, false), sandbox("b", member, false, false)}, want: false},
		"TakenByClaims":       {sandboxes: []*agentsv1beta1.Sandbox{sandbox("a", member, true, false), sandbox("b", "SandboxClaim", true, false), sandbox("c", "SandboxClaim", true, false)}, want: false},
		"OneBeingDeleted":     {sandboxes: []*agentsv1beta1.Sandbox{sandbox("a", member, true, false), sandbox("b", member, true, true)}, want: false},
		"ReadyOrphansCount":   {sandboxes: []*agentsv1beta1.Sandbox{sandbox("a", "", true, false), sandbox("b", "", true, false)}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := PoolKeepsReserve(pool, tc.sandboxes); got != tc.want {
				t.Errorf("PoolKeepsReserve = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPoolKeepsReserveCountsAsPoolStatus: stopping the count at the reserve gives the answer
// poolBackground gives on poolStatus of the pool's members, on every mix of members, claimed
// Sandboxes, orphans, deleted and unready ones, and pool sizes.
func TestPoolKeepsReserveCountsAsPoolStatus(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	for replicas := int32(0); replicas <= 12; replicas++ {
		pool := testPool(replicas, "")
		for mix := range 200 {
			var sandboxes, members []*agentsv1beta1.Sandbox
			for i := range mix % 17 {
				var opts []memberOpt
				switch (mix*7 + i*3) % 6 {
				case 0, 1:
					opts = append(opts, ready)
				case 2:
					opts = append(opts, ready, deleting)
				case 3:
					opts = append(opts, ready, orphaned)
				case 4:
					opts = append(opts, ready, func(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences[0].Kind = extv1beta1.SandboxClaimKind })
				}
				sb := member(pool, tpl, fmt.Sprintf("m-%d", i), time.Minute, opts...)
				sandboxes = append(sandboxes, sb)
				if poolMember(pool, sb) {
					members = append(members, sb)
				}
			}
			want := poolBackground(pool, poolStatus(pool, members))
			if got := PoolKeepsReserve(pool, sandboxes); got != want {
				t.Fatalf("replicas %d, mix %d: PoolKeepsReserve = %v, PoolBackground on PoolStatus = %v", replicas, mix, got, want)
			}
		}
	}
}
