package render

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// readyAt is ready, with the Ready condition's transition at at.
func readyAt(at time.Time) memberOpt {
	return func(sb *agentsv1beta1.Sandbox) {
		ready(sb)
		sb.Status.Conditions[len(sb.Status.Conditions)-1].LastTransitionTime = metav1.NewTime(at)
	}
}

// claimed is a member a claim adopted: controlled by the claim (the pool's label left on, so that
// only the controller reference tells it apart).
func claimed(sb *agentsv1beta1.Sandbox) {
	sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: extv1beta1.SandboxClaimKind, Name: "claim", UID: "claim-uid", Controller: ptr.To(true)}}
}

// TestPlanPoolRollingUpdate: each step of a RollingUpdate, as PlanPool decides it.
func TestPlanPoolRollingUpdate(t *testing.T) {
	old := poolTemplate("python:3.12")
	older := poolTemplate("python:3.11")
	tpl := poolTemplate("python:3.13")
	names := PoolMemberNames("ns", "pool", 4, nil)
	three := rollingPool(3, nil, nil) // maxSurge 1, maxUnavailable 0
	four := rollingPool(4, nil, nil)  // maxSurge 1, maxUnavailable 1
	type summary struct {
		Create      []string
		Delete      []string
		Events      []string
		Progressing string
		Updated     int32
		Ready       int32
	}
	// m is a member of p made from t, created age ago.
	m := func(p *extv1beta1.SandboxWarmPool, t *extv1beta1.SandboxTemplate, name string, age time.Duration, opts ...memberOpt) *agentsv1beta1.Sandbox {
		return member(p, t, name, age, opts...)
	}
	staleReady := func(p *extv1beta1.SandboxWarmPool, n int) []*agentsv1beta1.Sandbox {
		var out []*agentsv1beta1.Sandbox
		for i := range n {
			out = append(out, m(p, old, fmt.Sprintf("old-%d", i), time.Duration(10-i)*time.Hour, ready))
		}
		return out
	}
	with := func(members []*agentsv1beta1.Sandbox, more ...*agentsv1beta1.Sandbox) []*agentsv1beta1.Sandbox {
		return append(slices.Clone(members), more...)
	}
	cases := map[string]struct {
		reason string
		pool   *extv1beta1.SandboxWarmPool
		found  PoolFound
		want   summary
	}{
		"surge": {
			reason: "a full pool of stale Ready members gets one updated member more; none is deleted (maxUnavailable 0)",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: staleReady(three, 3)},
			want: summary{Create: names[:1], Progressing: extv1beta1.MembersUpdatedReason, Ready: 3},
		},
		"wait": {
			reason: "at the surge bound with the new member not Ready, nothing is deleted or created",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 3), m(three, tpl, names[0], time.Minute))},
			want: summary{Progressing: extv1beta1.MembersUpdatedReason, Updated: 1, Ready: 3},
		},
		"retire": {
			reason: "once the new member is Ready, one stale Ready member goes, the newest; its replacement waits until it is gone",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 3), m(three, tpl, names[0], time.Minute, ready))},
			want: summary{Delete: []string{"old-2 " + deleteStale}, Progressing: extv1beta1.MembersUpdatedReason, Updated: 1, Ready: 3},
		},
		"a retiring member counts against the surge": {
			reason: "a stale member on its way out still takes its place",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 2), m(three, old, "old-2", time.Hour, ready, deleting), m(three, tpl, names[0], time.Minute, ready))},
			want: summary{Progressing: extv1beta1.MembersUpdatedReason, Updated: 1, Ready: 3},
		},
		"next surge": {
			reason: "once it is gone, the next updated member is created",
			pool:   three, found: PoolFound{Template: tpl, Taken: map[string]bool{names[0]: true}, Sandboxes: with(staleReady(three, 2), m(three, tpl, names[0], time.Minute, ready))},
			want: summary{Create: []string{PoolMemberName("ns", "pool", 0, 1)}, Progressing: extv1beta1.MembersUpdatedReason, Updated: 1, Ready: 3},
		},
		"last stale member": {
			reason: "with every updated member Ready, the last stale one goes",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 1), m(three, tpl, "a", time.Minute, ready), m(three, tpl, "b", time.Minute, ready), m(three, tpl, "c", time.Minute, ready))},
			want: summary{Delete: []string{"old-0 " + deleteStale}, Progressing: extv1beta1.MembersUpdatedReason, Updated: 3, Ready: 3},
		},
		"complete": {
			reason: "no stale member left and every member Ready: the pool fills and scales as any other",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{m(three, tpl, "a", time.Minute, ready), m(three, tpl, "b", time.Minute, ready), m(three, tpl, "c", time.Minute, ready)}},
			want: summary{Progressing: extv1beta1.RolloutCompleteReason, Updated: 3, Ready: 3},
		},
		"not Ready stale members go first": {
			reason: "a stale member that is not Ready serves no claim: it goes whatever the budget, and its place goes to an updated member",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 2), m(three, old, "old-starting", time.Minute, networked))},
			want: summary{Create: names[:1], Delete: []string{"old-starting " + deleteStale}, Progressing: extv1beta1.MembersUpdatedReason, Ready: 2},
		},
		"maxUnavailable": {
			reason: "a pool of 4 (25% each) retires one Ready stale member before any new one is Ready, and surges one",
			pool:   four, found: PoolFound{Template: tpl, Sandboxes: staleReady(four, 4)},
			want: summary{Create: names[:1], Delete: []string{"old-3 " + deleteStale}, Progressing: extv1beta1.MembersUpdatedReason, Ready: 3},
		},
		"maxUnavailable reached": {
			reason: "with one Ready member short already, no Ready member goes until a new one is Ready",
			pool:   four, found: PoolFound{Template: tpl, Taken: map[string]bool{names[0]: true}, Sandboxes: with(staleReady(four, 3), m(four, tpl, names[0], time.Minute))},
			want: summary{Create: []string{PoolMemberName("ns", "pool", 0, 1)}, Progressing: extv1beta1.MembersUpdatedReason, Updated: 1, Ready: 3},
		},
		"percentages": {
			reason: "10 members, maxSurge 30% (3), maxUnavailable 20% (2): two stale go, three updated come",
			pool:   rollingPool(10, pct("30%"), pct("20%")),
			found:  PoolFound{Template: tpl, Sandboxes: staleReady(rollingPool(10, nil, nil), 10)},
			want: summary{Create: PoolMemberNames("ns", "pool", 3, nil), Delete: []string{"old-9 " + deleteStale, "old-8 " + deleteStale},
				Progressing: extv1beta1.MembersUpdatedReason, Ready: 8},
		},
		"pool of 1 surges": {
			reason: "25% unavailable of 1 is 0 and 25% surge is 1: the new member comes first",
			pool:   rollingPool(1, nil, nil), found: PoolFound{Template: tpl, Sandboxes: staleReady(rollingPool(1, nil, nil), 1)},
			want: summary{Create: names[:1], Progressing: extv1beta1.MembersUpdatedReason, Ready: 1},
		},
		"pool of 1 retires": {
			reason: "and the stale one goes once it is Ready",
			pool:   rollingPool(1, nil, nil), found: PoolFound{Template: tpl, Sandboxes: with(staleReady(rollingPool(1, nil, nil), 1), m(rollingPool(1, nil, nil), tpl, names[0], time.Minute, ready))},
			want: summary{Delete: []string{"old-0 " + deleteStale}, Progressing: extv1beta1.MembersUpdatedReason, Updated: 1, Ready: 1},
		},
		"maxSurge 0": {
			reason: "without a surge, the rollout makes room first: one Ready stale member goes (maxUnavailable 1), and its replacement waits for it",
			pool:   rollingPool(2, num(0), num(1)), found: PoolFound{Template: tpl, Sandboxes: staleReady(rollingPool(2, nil, nil), 2)},
			want: summary{Delete: []string{"old-1 " + deleteStale}, Progressing: extv1beta1.MembersUpdatedReason, Ready: 1},
		},
		"template changed mid-rollout": {
			reason: "members of every older template are stale alike: the rollout starts over from where it is",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				m(three, older, "older-0", 3*time.Hour, ready), m(three, older, "older-1", 2*time.Hour, ready), m(three, old, "old-0", time.Hour, ready)}},
			want: summary{Create: names[:1], Progressing: extv1beta1.MembersUpdatedReason, Ready: 3},
		},
		"template changed mid-rollout, the last one's member Ready": {
			reason: "the member of the template before is retired like the others, newest first",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: []*agentsv1beta1.Sandbox{
				m(three, older, "older-0", 3*time.Hour, ready), m(three, older, "older-1", 2*time.Hour, ready), m(three, old, "old-0", time.Hour, ready), m(three, tpl, names[0], time.Minute, ready)}},
			want: summary{Delete: []string{"old-0 " + deleteStale}, Progressing: extv1beta1.MembersUpdatedReason, Updated: 1, Ready: 3},
		},
		"a claimed stale Sandbox is left alone": {
			reason: "a Sandbox a claim controls is not the pool's: never deleted, never counted",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 3), m(three, old, "claimed", time.Hour, ready, claimed))},
			want: summary{Create: names[:1], Progressing: extv1beta1.MembersUpdatedReason, Ready: 3},
		},
		"a new member that never becomes Ready": {
			reason: "it is replaced after the readiness grace, as in any pool; the stale members stay",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 3), m(three, tpl, names[0], 6*time.Minute))},
			want: summary{Delete: []string{names[0] + " " + deleteStuck}, Progressing: extv1beta1.MembersUpdatedReason, Ready: 3},
		},
		"in-flight creates are updated members": {
			reason: "a create the cache does not show yet takes the surge",
			pool:   three, found: PoolFound{Template: tpl, Sandboxes: staleReady(three, 3), InFlightCreates: 1},
			want: summary{Progressing: extv1beta1.MembersUpdatedReason, Ready: 3},
		},
		"scaled down mid-rollout": {
			reason: "spec.replicas lowered to 2: the stale member goes, then the updated one above 2, while 2 Ready stay",
			pool:   rollingPool(2, nil, nil), found: PoolFound{Template: tpl, Sandboxes: with(staleReady(three, 1),
				m(three, tpl, "a", 3*time.Minute, ready), m(three, tpl, "b", 2*time.Minute, ready), m(three, tpl, "c", time.Minute, ready))},
			want: summary{Delete: []string{"old-0 " + deleteStale, "c " + deleteScaleDown}, Progressing: extv1beta1.MembersUpdatedReason, Updated: 2, Ready: 2},
		},
		"invalid bounds": {
			reason: "bounds the CRD refuses replace nothing, and the pool says why",
			pool:   rollingPool(3, num(0), num(0)), found: PoolFound{Template: tpl, Sandboxes: staleReady(three, 3)},
			want: summary{Events: []string{"Warning InvalidUpdateStrategy"}, Progressing: extv1beta1.NewMembersCreatedReason, Ready: 3},
		},
		"no template": {
			reason: "nothing is judged stale, nothing replaced",
			pool:   three, found: PoolFound{Sandboxes: staleReady(three, 3)},
			want: summary{Progressing: extv1beta1.PoolTemplateNotFoundReason, Ready: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := PlanPool(tc.pool, tc.found, planNow, Options{})
			got := summary{Updated: plan.Status.UpdatedReplicas, Ready: plan.Status.ReadyReplicas}
			for _, s := range plan.Steps {
				switch s.Action {
				case ActionCreate:
					got.Create = append(got.Create, s.Name)
					if sb := s.Intent.Object.(*agentsv1beta1.Sandbox); sb.Spec.PodTemplate.Spec.Containers[0].Image != "python:3.13" {
						t.Errorf("%s is not made from the current template", s.Name)
					}
				case ActionDelete:
					got.Delete = append(got.Delete, s.Name+" "+s.Reason)
					if s.Precondition == nil || s.Precondition.ResourceVersion == "" {
						t.Errorf("delete of %s without its version", s.Name)
					}
				default:
					t.Errorf("unexpected step %s %s", s.Action, s.Name)
				}
			}
			for _, e := range plan.Events {
				got.Events = append(got.Events, e.Type+" "+e.Reason)
			}
			if c := meta.FindStatusCondition(plan.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing); c != nil {
				got.Progressing = c.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			// Pure and deterministic: the members in another order give the same plan.
			shuffled := tc.found
			shuffled.Sandboxes = slices.Clone(tc.found.Sandboxes)
			rand.New(rand.NewSource(1)).Shuffle(len(shuffled.Sandboxes), func(i, j int) {
				shuffled.Sandboxes[i], shuffled.Sandboxes[j] = shuffled.Sandboxes[j], shuffled.Sandboxes[i]
			})
			if diff := cmp.Diff(plan, PlanPool(tc.pool, shuffled, planNow, Options{})); diff != "" {
				t.Errorf("the plan depends on the order of the members (-in order +shuffled):\n%s", diff)
			}
		})
	}
}

// TestRollingUpdateConverges drives whole rollouts pass by pass (each pass's deletes and creates
// done at once, members created by one pass Ready by the next unless they never start), for
// pools of several sizes and bounds: the Ready members never go below desired-maxUnavailable
// (nor below what there was), the members never above desired+maxSurge, and a rollout whose new
// members start completes with every member updated, while one whose new members never start
// stops at the bound with its stale Ready members kept.
func TestRollingUpdateConverges(t *testing.T) {
	old := poolTemplate("python:3.12")
	tpl := poolTemplate("python:3.13")
	third := poolTemplate("python:3.14")
	for _, tc := range []struct {
		replicas                 int32
		maxSurge, maxUnavailable *intstr.IntOrString
	}{
		{1, nil, nil}, {3, nil, nil}, {4, nil, nil}, {10, nil, nil}, {7, num(0), num(2)}, {7, num(3), num(0)},
		{5, pct("100%"), pct("0%")}, {5, pct("0%"), pct("100%")}, {6, num(2), num(2)},
	} {
		for _, mode := range []string{"starts", "never starts", "template changed again"} {
			name := fmt.Sprintf("%d members, maxSurge %v, maxUnavailable %v, %s", tc.replicas, tc.maxSurge, tc.maxUnavailable, mode)
			t.Run(name, func(t *testing.T) {
				pool := rollingPool(tc.replicas, tc.maxSurge, tc.maxUnavailable)
				b, err := poolRollingBounds(pool, int(tc.replicas))
				if err != nil {
					t.Fatal(err)
				}
				minReady, maxTotal := max(int(tc.replicas)-b.MaxUnavailable, 0), int(tc.replicas)+b.MaxSurge
				now := planNow
				var members []*agentsv1beta1.Sandbox
				for i := range int(tc.replicas) {
					members = append(members, member(pool, old, fmt.Sprintf("old-%d", i), time.Hour, ready))
				}
				current := tpl
				countReady := func() int {
					n := 0
					for _, sb := range members {
						if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
							n++
						}
					}
					return n
				}
				for pass := range 200 {
					if mode == "template changed again" && pass == 3 {
						current = third
					}
					// The members created by the last pass start, unless they never do.
					for _, sb := range members {
						if mode != "never starts" && len(sb.Status.Conditions) == 0 {
							readyAt(now)(sb)
						}
					}
					taken := map[string]bool{}
					for _, sb := range members {
						taken[sb.Name] = true
					}
					before := countReady()
					plan := PlanPool(pool, PoolFound{Template: current, Sandboxes: members, Taken: taken}, now, Options{})
					for _, s := range plan.Steps {
						switch s.Action {
						case ActionDelete:
							members = slices.DeleteFunc(members, func(sb *agentsv1beta1.Sandbox) bool { return sb.Name == s.Name })
						case ActionCreate:
							sb := s.Intent.Object.(*agentsv1beta1.Sandbox).DeepCopy()
							sb.CreationTimestamp, sb.UID, sb.ResourceVersion = metav1.NewTime(now), k8stypes.UID("uid-"+sb.Name), "1"
							members = append(members, sb)
						}
					}
					if r := countReady(); r < min(minReady, before) {
						t.Fatalf("pass %d: %d Ready members left, fewer than %d (and than the %d before)", pass, r, minReady, before)
					}
					if len(members) > maxTotal {
						t.Fatalf("pass %d: %d members, more than %d", pass, len(members), maxTotal)
					}
					pool = pool.DeepCopy()
					pool.Status = *plan.Status
					now = now.Add(10 * time.Second)
					c := meta.FindStatusCondition(plan.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing)
					if mode != "never starts" && len(plan.Steps) == 0 && c.Reason == extv1beta1.RolloutCompleteReason {
						h, _ := TemplateHashes(current)
						for _, sb := range members {
							if isStale(sb, current, h, Options{}) {
								t.Fatalf("complete with %s stale", sb.Name)
							}
						}
						if len(members) != int(tc.replicas) {
							t.Fatalf("complete with %d members", len(members))
						}
						return
					}
				}
				if mode != "never starts" {
					t.Fatalf("not complete after 200 passes: %d members", len(members))
				}
				// Stuck at the bound: every stale Ready member the bound keeps is still there (a
				// member not Ready past the grace is replaced: the clock here stays within it).
				if r := countReady(); r < minReady {
					t.Errorf("stuck rollout: %d Ready members, want at least %d", r, minReady)
				}
			})
		}
	}
}

// TestPoolRolloutStatusRollingDeadline: under RollingUpdate the progress deadline is measured
// from the rollout's last progress, so a rollout whose new members are replaced after the
// readiness grace still reaches ProgressDeadlineExceeded.
func TestPoolRolloutStatusRollingDeadline(t *testing.T) {
	old := poolTemplate("python:3.12")
	tpl := poolTemplate("python:3.13")
	pool := rollingPool(2, nil, nil)
	bounds := &rollingBounds{MaxSurge: 1}
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(planNow.Add(-d)) }
	h, _ := TemplateHashes(tpl)
	progressing := func(status metav1.ConditionStatus, reason string, since metav1.Time) metav1.Condition {
		return metav1.Condition{Type: extv1beta1.SandboxWarmPoolProgressing, Status: status, Reason: reason, LastTransitionTime: since, ObservedGeneration: 3,
			Message: "…: 1 updated (template hash " + h.Blueprint + "), 0 updated Ready, 2 desired"}
	}
	otherRollout := func(c metav1.Condition) *metav1.Condition {
		c.Message = "…: 1 updated (template hash 0123abcd), 0 updated Ready, 2 desired"
		return &c
	}
	staleReady := []*agentsv1beta1.Sandbox{member(pool, old, "old-0", time.Hour, ready), member(pool, old, "old-1", time.Hour, ready)}
	starting := member(pool, tpl, "new-0", 2*time.Minute) // a replacement of one not Ready after the grace
	type want struct {
		Status metav1.ConditionStatus
		Reason string
		Since  metav1.Time
		Next   time.Duration
	}
	cases := map[string]struct {
		reason  string
		prev    *metav1.Condition
		members []*agentsv1beta1.Sandbox
		want    want
	}{
		"the rollout begins": {
			reason:  "Progressing turns True now, and the pass comes back for the member's own deadline, the earlier",
			prev:    ptr.To(progressing(metav1.ConditionFalse, extv1beta1.RolloutCompleteReason, at(time.Hour))),
			members: append(slices.Clone(staleReady), starting),
			want:    want{metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, metav1.NewTime(planNow), 8*time.Minute + time.Second},
		},
		"no progress for longer than the deadline": {
			reason:  "True for 11 minutes with no updated member Ready: exceeded, although the member is 2 minutes old",
			prev:    ptr.To(progressing(metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, at(11*time.Minute))),
			members: append(slices.Clone(staleReady), starting),
			want:    want{metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, metav1.NewTime(planNow), 8*time.Minute + time.Second},
		},
		"progress within the deadline": {
			reason: "an updated member became Ready 3 minutes ago: the deadline counts from then",
			prev:   ptr.To(progressing(metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, at(11*time.Minute))),
			members: []*agentsv1beta1.Sandbox{staleReady[0], member(pool, tpl, "new-1", 4*time.Minute, readyAt(planNow.Add(-3*time.Minute))),
				member(pool, tpl, "new-2", 9*time.Minute+30*time.Second)},
			want: want{metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, at(11 * time.Minute), 31 * time.Second},
		},
		"still exceeded": {
			reason:  "no updated member became Ready since: it stays exceeded, its transition kept",
			prev:    ptr.To(progressing(metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, at(time.Minute))),
			members: append(slices.Clone(staleReady), starting),
			want:    want{metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, at(time.Minute), 8*time.Minute + time.Second},
		},
		"a rollout to another template": {
			reason:  "the template changed while Progressing was True for another rollout: it is set anew, and the count starts now",
			prev:    otherRollout(progressing(metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, at(30*time.Minute))),
			members: append(slices.Clone(staleReady), starting),
			want:    want{metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, metav1.NewTime(planNow), 8*time.Minute + time.Second},
		},
		"a rollout to another template, the last one exceeded": {
			reason:  "a new template is a new rollout: True again",
			prev:    otherRollout(progressing(metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, at(time.Minute))),
			members: append(slices.Clone(staleReady), starting),
			want:    want{metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, metav1.NewTime(planNow), 8*time.Minute + time.Second},
		},
		"progress resumes": {
			reason:  "an updated member became Ready after the deadline was exceeded: True again, counted from now",
			prev:    ptr.To(progressing(metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, at(5*time.Minute))),
			members: []*agentsv1beta1.Sandbox{staleReady[0], staleReady[1], member(pool, tpl, "new-1", 2*time.Minute, readyAt(planNow.Add(-time.Minute)))},
			want:    want{metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, metav1.NewTime(planNow), 10*time.Minute + time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := pool.DeepCopy()
			p.Status.Conditions = []metav1.Condition{*tc.prev}
			stale := map[*agentsv1beta1.Sandbox]bool{}
			for _, m := range tc.members {
				if isStale(m, tpl, h, Options{}) {
					stale[m] = true
				}
			}
			st, next := poolRolloutStatus(p, poolStatus(p, tc.members), tc.members, poolRollout{TemplateFound: true, Desired: 2, Stale: stale, ReplacesStale: true, Rolling: bounds, TemplateHash: h.Blueprint}, planNow)
			c := meta.FindStatusCondition(st.Conditions, extv1beta1.SandboxWarmPoolProgressing)
			got := want{c.Status, c.Reason, c.LastTransitionTime, next}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s\nmessage: %s", tc.reason, diff, c.Message)
			}
		})
	}
}

// TestClaimWarmCandidatesRollingUpdate: claims of a RollingUpdate pool take the Ready members
// made from the current template before the stale ones; an OnReplenish pool keeps upstream's
// order (oldest first, stale or not).
func TestClaimWarmCandidatesRollingUpdate(t *testing.T) {
	old := poolTemplate("python:3.12")
	tpl := poolTemplate("python:3.13")
	rolling := rollingPool(3, nil, nil)
	onReplenish := testPool(3, "")
	members := func(p *extv1beta1.SandboxWarmPool) []*agentsv1beta1.Sandbox {
		return []*agentsv1beta1.Sandbox{
			member(p, old, "stale-old", 3*time.Hour, ready), member(p, old, "stale-young", 2*time.Hour, ready),
			member(p, tpl, "fresh-old", 2*time.Minute, ready), member(p, tpl, "fresh-young", time.Minute, ready),
			member(p, tpl, "fresh-net", time.Minute, networked),
		}
	}
	cases := map[string]struct {
		pool *extv1beta1.SandboxWarmPool
		rank int
		want []string
	}{
		"RollingUpdate, first claim":  {rolling, 0, []string{"fresh-old", "fresh-young", "stale-old", "stale-young", "fresh-net"}},
		"RollingUpdate, second claim": {rolling, 1, []string{"fresh-young", "stale-old", "stale-young", "fresh-old", "fresh-net"}},
		"RollingUpdate, third claim":  {rolling, 2, []string{"stale-old", "stale-young", "fresh-old", "fresh-young", "fresh-net"}},
		"OnReplenish":                 {onReplenish, 0, []string{"stale-old", "stale-young", "fresh-old", "fresh-young", "fresh-net"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := claimWarmCandidates(claimOn("pool", "1"), ClaimPool{Pool: tc.pool, Template: tpl}, members(tc.pool), tc.rank, nil, Options{})
			var names []string
			for _, sb := range got.Adoptable {
				names = append(names, sb.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}
