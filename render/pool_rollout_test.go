package render

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// TestPoolRolloutStatus: the counts, the two conditions with their reasons and messages, the
// transition times (kept while a condition's status stays), and when the pass comes back for a
// progress deadline, under each strategy.
func TestPoolRolloutStatus(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	old := poolTemplate("python:3.11")
	recreate := testPool(3, extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType)
	onReplenish := testPool(3, "")
	earlier := metav1.NewTime(planNow.Add(-time.Hour))
	nowT := metav1.NewTime(planNow)
	cond := func(typ string, status metav1.ConditionStatus, reason, message string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: 3, LastTransitionTime: at}
	}
	available := func(status metav1.ConditionStatus, ready, desired string, at metav1.Time) metav1.Condition {
		reason := extv1beta1.MinimumReplicasAvailableReason
		if status == metav1.ConditionFalse {
			reason = extv1beta1.MinimumReplicasUnavailableReason
		}
		return cond(extv1beta1.SandboxWarmPoolAvailable, status, reason, ready+" of "+desired+" members Ready", at)
	}
	progressing := func(status metav1.ConditionStatus, reason, message string, at metav1.Time) metav1.Condition {
		return cond(extv1beta1.SandboxWarmPoolProgressing, status, reason, message, at)
	}
	withStatus := func(p *extv1beta1.SandboxWarmPool, cs ...metav1.Condition) *extv1beta1.SandboxWarmPool {
		p = p.DeepCopy()
		p.Status.Conditions = cs
		return p
	}
	withDeadline := func(p *extv1beta1.SandboxWarmPool, s int32) *extv1beta1.SandboxWarmPool {
		p = p.DeepCopy()
		p.Spec.ProgressDeadlineSeconds = ptr.To(s)
		return p
	}
	type want struct {
		Updated, UpdatedReady int32
		Conditions            []metav1.Condition
		Next                  time.Duration
	}
	cases := map[string]struct {
		reason  string
		pool    *extv1beta1.SandboxWarmPool
		members []*agentsv1beta1.Sandbox
		rollout poolRollout
		want    want
	}{
		"filling": {
			reason: "a pool short of members is Progressing with NewMembersCreated until they exist and are Ready",
			pool:   onReplenish,
			members: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, "a", time.Minute, ready), member(onReplenish, tpl, "b", time.Minute)},
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 2, UpdatedReady: 1, Next: 9*time.Minute + time.Second, Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "1", "3", nowT),
				progressing(metav1.ConditionTrue, extv1beta1.NewMembersCreatedReason, "Waiting for new members to be created and become Ready: 2 updated, 1 updated Ready, 3 desired", nowT),
			}},
		},
		"Recreate deletes stale members": {
			reason:  "the pass that deletes stale members to replace them says MembersUpdated",
			pool:    recreate,
			rollout: poolRollout{TemplateFound: true, Desired: 3, ReplacingStale: 3, ReplacesStale: true},
			want: want{Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "0", "3", nowT),
				progressing(metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, "Replacing members made from an older template: 0 updated, 0 updated Ready, 3 desired", nowT),
			}},
		},
		"Recreate refills after replacing": {
			reason: "MembersUpdated lasts while the replacements are made, and keeps its transition time",
			pool: withStatus(recreate,
				available(metav1.ConditionFalse, "0", "3", earlier),
				progressing(metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, "Replacing members made from an older template: 0 updated, 0 updated Ready, 3 desired", earlier)),
			members: []*agentsv1beta1.Sandbox{
				member(recreate, tpl, "a", time.Minute, ready), member(recreate, tpl, "b", time.Second)},
			rollout: poolRollout{TemplateFound: true, Desired: 3, ReplacesStale: true},
			want: want{Updated: 2, UpdatedReady: 1, Next: 10 * time.Minute, Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "1", "3", earlier),
				progressing(metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, "Replacing members made from an older template: 2 updated, 1 updated Ready, 3 desired", earlier),
			}},
		},
		"Recreate done": {
			reason: "the rollout completes once every member is made from the current template and Ready",
			pool: withStatus(recreate,
				available(metav1.ConditionFalse, "2", "3", earlier),
				progressing(metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, "Replacing members made from an older template: 3 updated, 2 updated Ready, 3 desired", earlier)),
			members: []*agentsv1beta1.Sandbox{
				member(recreate, tpl, "a", time.Minute, ready), member(recreate, tpl, "b", time.Minute, ready), member(recreate, tpl, "c", time.Minute, ready)},
			rollout: poolRollout{TemplateFound: true, Desired: 3, ReplacesStale: true},
			want: want{Updated: 3, UpdatedReady: 3, Conditions: []metav1.Condition{
				available(metav1.ConditionTrue, "3", "3", nowT),
				progressing(metav1.ConditionFalse, extv1beta1.RolloutCompleteReason, "Every member wanted exists and is Ready: 3 updated, 3 updated Ready, 3 desired", nowT),
			}},
		},
		"OnReplenish full with stale members": {
			reason: "OnReplenish keeps stale members by design: full and Ready is complete, and the message says how many are stale",
			pool:   onReplenish,
			members: func() []*agentsv1beta1.Sandbox {
				a, b := member(onReplenish, old, "a", time.Hour, ready), member(onReplenish, old, "b", time.Hour, ready)
				return []*agentsv1beta1.Sandbox{a, b, member(onReplenish, tpl, "c", time.Minute, ready)}
			}(),
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 1, UpdatedReady: 1, Conditions: []metav1.Condition{
				available(metav1.ConditionTrue, "3", "3", nowT),
				progressing(metav1.ConditionFalse, extv1beta1.RolloutCompleteReason, "Every member wanted exists and is Ready: 1 updated, 1 updated Ready, 3 desired; 2 members are from an older template, replaced as they are claimed (updateStrategy OnReplenish)", nowT),
			}},
		},
		"exactly at the deadline": {
			reason: "a member that has existed for exactly the deadline has not exceeded it; the pass comes back a second later",
			pool:   onReplenish,
			members: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, "a", time.Minute, ready), member(onReplenish, tpl, "b", time.Minute, ready), member(onReplenish, tpl, "c", 600*time.Second)},
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 3, UpdatedReady: 2, Next: time.Second, Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "2", "3", nowT),
				progressing(metav1.ConditionTrue, extv1beta1.NewMembersCreatedReason, "Waiting for new members to be created and become Ready: 3 updated, 2 updated Ready, 3 desired", nowT),
			}},
		},
		"one second past the deadline": {
			reason: "a member made from the current template that is not Ready a second past the deadline: ProgressDeadlineExceeded, naming it",
			pool: withStatus(onReplenish,
				available(metav1.ConditionFalse, "2", "3", earlier),
				progressing(metav1.ConditionTrue, extv1beta1.NewMembersCreatedReason, "Waiting for new members to be created and become Ready: 3 updated, 2 updated Ready, 3 desired", earlier)),
			members: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, "a", time.Minute, ready), member(onReplenish, tpl, "b", time.Minute, ready), member(onReplenish, tpl, "c", 601*time.Second)},
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 3, UpdatedReady: 2, Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "2", "3", earlier),
				progressing(metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, `Sandbox "c", made from the current template, is not Ready after progressDeadlineSeconds (600): 3 updated, 2 updated Ready, 3 desired`, nowT),
			}},
		},
		"the oldest stuck member is named, ties by name": {
			reason: "of several members past the deadline the oldest is named, the first by name among equals",
			pool:   withDeadline(onReplenish, 30),
			members: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, "z", 2*time.Minute), member(onReplenish, tpl, "y", 2*time.Minute), member(onReplenish, tpl, "a", time.Minute)},
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 3, Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "0", "3", nowT),
				progressing(metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, `Sandbox "y", made from the current template, is not Ready after progressDeadlineSeconds (30): 3 updated, 0 updated Ready, 3 desired`, nowT),
			}},
		},
		"stale members do not count against the deadline": {
			reason: "only members made from the current template are held to the progress deadline",
			pool:   withDeadline(onReplenish, 30),
			members: func() []*agentsv1beta1.Sandbox {
				return []*agentsv1beta1.Sandbox{member(onReplenish, old, "a", time.Hour), member(onReplenish, tpl, "b", time.Second)}
			}(),
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 1, Next: 30 * time.Second, Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "0", "3", nowT),
				progressing(metav1.ConditionTrue, extv1beta1.NewMembersCreatedReason, "Waiting for new members to be created and become Ready: 1 updated, 0 updated Ready, 3 desired; 1 member is from an older template, replaced as it is claimed (updateStrategy OnReplenish)", nowT),
			}},
		},
		"a stuck member that becomes Ready": {
			reason: "progress after the deadline makes the pool Progressing again, with a new transition time",
			pool: withStatus(onReplenish,
				available(metav1.ConditionFalse, "0", "3", earlier),
				progressing(metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, "x", earlier)),
			members: []*agentsv1beta1.Sandbox{member(onReplenish, tpl, "a", time.Hour, ready)},
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 1, UpdatedReady: 1, Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "1", "3", earlier),
				progressing(metav1.ConditionTrue, extv1beta1.NewMembersCreatedReason, "Waiting for new members to be created and become Ready: 1 updated, 1 updated Ready, 3 desired", nowT),
			}},
		},
		"no template": {
			reason: "without a template nothing is created or replaced, and no member is counted as made from it",
			pool:   onReplenish,
			members: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, "a", time.Hour, ready), member(onReplenish, tpl, "b", time.Hour)},
			rollout: poolRollout{Desired: 3},
			want: want{Conditions: []metav1.Condition{
				available(metav1.ConditionFalse, "1", "3", nowT),
				progressing(metav1.ConditionFalse, extv1beta1.PoolTemplateNotFoundReason, `SandboxTemplate "python" not found: no member is created or replaced; 1 of 3 members Ready`, nowT),
			}},
		},
		"empty pool of none": {
			reason:  "a pool of 0 replicas is available and complete",
			pool:    testPool(0, ""),
			rollout: poolRollout{TemplateFound: true},
			want: want{Conditions: []metav1.Condition{
				available(metav1.ConditionTrue, "0", "0", nowT),
				progressing(metav1.ConditionFalse, extv1beta1.RolloutCompleteReason, "Every member wanted exists and is Ready: 0 updated, 0 updated Ready, 0 desired", nowT),
			}},
		},
		"other conditions are kept": {
			reason: "conditions of other types stay where they are, and new ones are appended",
			pool:   withStatus(onReplenish, cond("Other", metav1.ConditionTrue, "Mine", "m", earlier)),
			members: []*agentsv1beta1.Sandbox{
				member(onReplenish, tpl, "a", time.Minute, ready), member(onReplenish, tpl, "b", time.Minute, ready), member(onReplenish, tpl, "c", time.Minute, ready)},
			rollout: poolRollout{TemplateFound: true, Desired: 3},
			want: want{Updated: 3, UpdatedReady: 3, Conditions: []metav1.Condition{
				cond("Other", metav1.ConditionTrue, "Mine", "m", earlier),
				available(metav1.ConditionTrue, "3", "3", nowT),
				progressing(metav1.ConditionFalse, extv1beta1.RolloutCompleteReason, "Every member wanted exists and is Ready: 3 updated, 3 updated Ready, 3 desired", nowT),
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stale := map[*agentsv1beta1.Sandbox]bool{}
			h, _ := TemplateHashes(tpl)
			for _, m := range tc.members {
				if tc.rollout.TemplateFound && isStale(m, tpl, h, Options{}) {
					stale[m] = true
				}
			}
			tc.rollout.Stale = stale
			before := tc.pool.DeepCopy()
			st, next := poolRolloutStatus(tc.pool, poolStatus(tc.pool, tc.members), tc.members, tc.rollout, planNow)
			got := want{Updated: st.UpdatedReplicas, UpdatedReady: st.UpdatedReadyReplicas, Conditions: st.Conditions, Next: next}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, tc.pool); diff != "" {
				t.Errorf("the pool was changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestPoolStatusAtRest: a pool whose members do not change gets back the status it has, through
// the API server's JSON, so that no pass writes it again; and the progress deadline changes it
// when it passes, with nothing else changed.
func TestPoolStatusAtRest(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	old := poolTemplate("python:3.11")
	names := PoolMemberNames("ns", "pool", 3, nil)
	for name, tc := range map[string]struct {
		pool    *extv1beta1.SandboxWarmPool
		members func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox
	}{
		"full and Ready": {testPool(2, ""), func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
			return []*agentsv1beta1.Sandbox{member(p, tpl, names[0], time.Minute, ready), member(p, tpl, names[1], time.Minute, ready)}
		}},
		"OnReplenish with stale members": {testPool(2, ""), func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
			return []*agentsv1beta1.Sandbox{member(p, old, names[0], time.Minute, ready), member(p, tpl, names[1], time.Minute, ready)}
		}},
		"a member starting": {testPool(2, extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType), func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
			return []*agentsv1beta1.Sandbox{member(p, tpl, names[0], time.Minute, ready), member(p, tpl, names[1], time.Minute)}
		}},
		"an unschedulable member held past the deadline": {testPool(2, ""), func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
			return []*agentsv1beta1.Sandbox{member(p, tpl, names[0], time.Minute, ready), member(p, tpl, names[1], time.Hour, unschedulableMember)}
		}},
		"RollingUpdate waiting on its new member": {testPool(2, extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType), func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
			return []*agentsv1beta1.Sandbox{member(p, old, names[0], time.Hour, ready), member(p, old, names[1], time.Hour, ready), member(p, tpl, "new", time.Minute)}
		}},
		"RollingUpdate stuck past its deadline": {testPool(2, extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType), func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
			return []*agentsv1beta1.Sandbox{member(p, old, names[0], time.Hour, ready), member(p, old, names[1], time.Hour, ready), member(p, tpl, "new", time.Hour, unschedulableMember)}
		}},
		"RollingUpdate complete": {testPool(2, extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType), func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
			return []*agentsv1beta1.Sandbox{member(p, tpl, names[0], time.Minute, ready), member(p, tpl, names[1], time.Minute, ready)}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			pool := tc.pool
			found := PoolFound{Template: tpl, Sandboxes: tc.members(pool), Taken: map[string]bool{names[0]: true, names[1]: true}}
			first := PlanPool(pool, found, planNow, Options{})
			if !first.WriteStatus {
				t.Fatalf("the first pass does not write the status")
			}
			pool = pool.DeepCopy()
			pool.Status = *viaAPI(t, first.Status)
			for _, at := range []time.Duration{time.Millisecond, 1500 * time.Millisecond} {
				again := PlanPool(pool, found, planNow.Add(at), Options{})
				if again.WriteStatus {
					t.Errorf("%v later, nothing changed, yet the status is written again (-stored +planned):\n%s", at, cmp.Diff(&pool.Status, again.Status))
				}
			}
		})
	}

	// A member starting: the deadline passes with nothing else changed, at the requeue planned.
	pool := testPool(2, "")
	pool.Spec.ProgressDeadlineSeconds = ptr.To[int32](120)
	found := PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{member(pool, tpl, names[0], time.Minute, ready), member(pool, tpl, names[1], time.Minute)}}
	first := PlanPool(pool, found, planNow, Options{})
	if got, want := first.RequeueAfter.Duration, 61*time.Second; got != want {
		t.Fatalf("requeue after %v, want %v (the deadline and a second)", got, want)
	}
	pool.Status = *viaAPI(t, first.Status)
	later := PlanPool(pool, found, planNow.Add(first.RequeueAfter.Duration), Options{})
	c := meta.FindStatusCondition(later.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing)
	if !later.WriteStatus || c == nil || c.Reason != extv1beta1.ProgressDeadlineExceededReason {
		t.Errorf("at the requeue: write %v, Progressing %+v; want ProgressDeadlineExceeded written", later.WriteStatus, c)
	}
}

// viaAPI passes a status through JSON, as the API server stores it.
func viaAPI(t *testing.T, st *extv1beta1.SandboxWarmPoolStatus) *extv1beta1.SandboxWarmPoolStatus {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	out := &extv1beta1.SandboxWarmPoolStatus{}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPoolAvailableUnderRollingUpdate: under RollingUpdate a pool is Available with
// spec.replicas - maxUnavailable members Ready, as a Deployment is, so a rollout step within its
// bound does not turn it unavailable; the other strategies want every member Ready.
func TestPoolAvailableUnderRollingUpdate(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	cases := map[string]struct {
		strategy extv1beta1.SandboxWarmPoolUpdateStrategyType
		rolling  *rollingBounds
		ready    int
		status   metav1.ConditionStatus
		message  string
	}{
		"RollingUpdate at its floor":    {extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType, &rollingBounds{MaxSurge: 2, MaxUnavailable: 1}, 4, metav1.ConditionTrue, "4 of 5 members Ready (at least 4 wanted: maxUnavailable 1)"},
		"RollingUpdate below it":        {extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType, &rollingBounds{MaxSurge: 2, MaxUnavailable: 1}, 3, metav1.ConditionFalse, "3 of 5 members Ready (at least 4 wanted: maxUnavailable 1)"},
		"RollingUpdate, none may go":    {extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType, &rollingBounds{MaxSurge: 1}, 4, metav1.ConditionFalse, "4 of 5 members Ready"},
		"maxUnavailable above replicas": {extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType, &rollingBounds{MaxUnavailable: 9}, 0, metav1.ConditionTrue, "0 of 5 members Ready (at least 0 wanted: maxUnavailable 9)"},
		"OnReplenish wants every one":   {"", nil, 4, metav1.ConditionFalse, "4 of 5 members Ready"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pool := testPool(5, tc.strategy)
			var members []*agentsv1beta1.Sandbox
			for i := range 5 {
				if i < tc.ready {
					members = append(members, member(pool, tpl, string(rune('a'+i)), time.Minute, ready))
				} else {
					members = append(members, member(pool, tpl, string(rune('a'+i)), time.Minute))
				}
			}
			st := extv1beta1.SandboxWarmPoolStatus{Replicas: 5, ReadyReplicas: int32(tc.ready)}
			got, _ := poolRolloutStatus(pool, st, members, poolRollout{TemplateFound: true, Desired: 5, Rolling: tc.rolling}, planNow)
			c := meta.FindStatusCondition(got.Conditions, extv1beta1.SandboxWarmPoolAvailable)
			if diff := cmp.Diff([]string{string(tc.status), tc.message}, []string{string(c.Status), c.Message}); diff != "" {
				t.Errorf("Available (-want +got):\n%s", diff)
			}
		})
	}
}
