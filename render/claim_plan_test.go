package render

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// TestPlanClaim: each decision of a claim's pass, as the plan says it: warm, wait, cold or
// take-over, the re-sync of a claimed Sandbox, expiry under each policy, the status hold and the
// events.
func TestPlanClaim(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	pool := testPool(2, "")
	cp := ClaimPool{Pool: pool, Template: tpl}
	young := func(c *extv1beta1.SandboxClaim) { c.CreationTimestamp = metav1.NewTime(planNow.Add(-time.Second)) }
	old := func(c *extv1beta1.SandboxClaim) { c.CreationTimestamp = metav1.NewTime(planNow.Add(-time.Hour)) }
	claim := func(opts ...func(*extv1beta1.SandboxClaim)) *extv1beta1.SandboxClaim {
		c := claimOn("pool", "a")
		c.ResourceVersion = "41"
		for _, o := range opts {
			o(c)
		}
		return c
	}
	expired := func(policy extv1beta1.ShutdownPolicy, marked bool) func(*extv1beta1.SandboxClaim) {
		return func(c *extv1beta1.SandboxClaim) {
			c.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: ptr.To(metav1.NewTime(planNow.Add(-time.Minute))), ShutdownPolicy: policy}
			if marked {
				c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ClaimExpiredReason, Message: ClaimExpiredMessage}}
			}
		}
	}
	owned := func(c *extv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
		sb, cerr := ClaimSandbox(c, cp, Options{})
		if cerr != nil {
			t.Fatal(cerr)
		}
		sb.UID, sb.ResourceVersion = "sb-uid", "30"
		ready(sb)
		return sb
	}
	earlierRender := func(c *extv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
		sb := owned(c)
		sb.OwnerReferences = nil
		return sb
	}
	foreign := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "claim-a", Namespace: "ns", UID: "other", ResourceVersion: "12"}}

	type summary struct {
		Steps        []string
		Status       string // Ready's reason, if the plan has a status
		WriteStatus  bool
		StatusEvents []string
		Requeue      time.Duration
		Launch       string
	}
	upstream := Options{Upstream: UpstreamAnnotations{Enabled: true, ClaimTiming: true}}
	annotated := func(c *extv1beta1.SandboxClaim) {
		c.Annotations = map[string]string{ClaimFirstObservedAnnotation: "2026-06-01T11:59:59Z", ClaimFirstReadyAnnotation: "2026-06-01T12:00:00Z"}
	}
	cases := map[string]struct {
		reason string
		claim  *extv1beta1.SandboxClaim
		found  func(c *extv1beta1.SandboxClaim) ClaimFound
		opts   Options
		want   summary
	}{
		"upstream annotations before Ready": {
			reason: "with --upstream-annotations a client that sees Ready must see upstream's annotations: they go first, and the Ready status waits for the next pass",
			claim:  claim(young),
			found:  func(c *extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Sandbox: owned(c)} },
			opts:   upstream,
			want:   summary{Steps: []string{"Update SandboxClaim claim-a"}, Status: agentsv1beta1.ReasonDependenciesReady, Requeue: annotationsBeforeReadyRecheck, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"upstream annotations there: Ready": {
			reason: "once the annotations are on the claim (or applied by this controller), the Ready status is written",
			claim:  claim(young, annotated),
			found:  func(c *extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Sandbox: owned(c)} },
			opts:   upstream,
			want:   summary{Status: agentsv1beta1.ReasonDependenciesReady, WriteStatus: true, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"warm ready": {
			reason: "a Ready member is adopted on its resourceVersion, and the claim is Ready at once",
			claim:  claim(young),
			found: func(*extv1beta1.SandboxClaim) ClaimFound {
				return ClaimFound{Pool: cp, Members: []*agentsv1beta1.Sandbox{member(pool, tpl, "m1", time.Minute, ready)}}
			},
			want: summary{Steps: []string{"Adopt Sandbox m1 on 7 Replan"}, Status: agentsv1beta1.ReasonDependenciesReady, WriteStatus: true, Launch: agentsv1beta1.SandboxLaunchTypeWarm},
		},
		"warm waiting": {
			reason: "a young claim waits for a member about to get its pod IP, and writes nothing",
			claim:  claim(young),
			found: func(*extv1beta1.SandboxClaim) ClaimFound {
				return ClaimFound{Pool: cp, Members: []*agentsv1beta1.Sandbox{member(pool, tpl, "m1", time.Second)}}
			},
			want: summary{Requeue: warmWaitPoll},
		},
		"cold after the wait": {
			reason: "an older claim with no member to take starts cold, create-only, under its own name",
			claim:  claim(old),
			found: func(*extv1beta1.SandboxClaim) ClaimFound {
				return ClaimFound{Pool: cp, Members: []*agentsv1beta1.Sandbox{member(pool, tpl, "m1", time.Second)}}
			},
			want: summary{Steps: []string{"Create Sandbox claim-a create-only Replan"}, Status: reasonSandboxNotReady, WriteStatus: true, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"cold start held": {
			reason: "a young claim's cold start writes its not-ready status only after the startup window",
			claim:  claim(young),
			found:  func(*extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp} },
			want:   summary{Steps: []string{"Create Sandbox claim-a create-only Replan"}, Status: reasonSandboxNotReady, Requeue: startupWindow - time.Second, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"take-over of an earlier render": {
			reason: "a refused create finds an earlier GitOps render of the claim's Sandbox, and applies over it on its version",
			claim:  claim(old),
			found: func(c *extv1beta1.SandboxClaim) ClaimFound {
				return ClaimFound{Pool: cp, Named: earlierRender(c)}
			},
			want: summary{Steps: []string{"Update Sandbox claim-a on 30 Replan"}, Status: reasonSandboxNotReady, WriteStatus: true, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"take-over before a warm member": {
			reason: "the claim's earlier render, applied with it by a GitOps tool, is taken over though a Ready member waits: the preview shows that Sandbox, and adopting beside it would run two Pods",
			claim:  claim(young),
			found: func(c *extv1beta1.SandboxClaim) ClaimFound {
				return ClaimFound{Pool: cp, Named: earlierRender(c), Members: []*agentsv1beta1.Sandbox{member(pool, tpl, "m1", time.Minute, ready)}}
			},
			want: summary{Steps: []string{"Update Sandbox claim-a on 30 Replan"}, Status: reasonSandboxNotReady, Requeue: startupWindow - time.Second, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"someone else's Sandbox of the name, a warm member": {
			reason: "a Sandbox of the claim's name that is not its render does not stop the warm path, as upstream",
			claim:  claim(young),
			found: func(*extv1beta1.SandboxClaim) ClaimFound {
				return ClaimFound{Pool: cp, Named: foreign, Members: []*agentsv1beta1.Sandbox{member(pool, tpl, "m1", time.Minute, ready)}}
			},
			want: summary{Steps: []string{"Adopt Sandbox m1 on 7 Replan"}, Status: agentsv1beta1.ReasonDependenciesReady, WriteStatus: true, Launch: agentsv1beta1.SandboxLaunchTypeWarm},
		},
		"take-over refused": {
			reason: "someone else's Sandbox under the claim's name is never taken; the error is retried and said once",
			claim:  claim(old),
			found:  func(*extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Named: foreign} },
			want: summary{Status: ReasonReconcilerError, WriteStatus: true, Requeue: claimDependencyRecheck,
				StatusEvents: []string{"Warning " + ReasonReconcilerError}},
		},
		"claimed and in sync": {
			reason: "a claimed Sandbox whose metadata is the template's needs no write; the claim mirrors it",
			claim:  claim(old),
			found:  func(c *extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Sandbox: owned(c)} },
			want:   summary{Status: agentsv1beta1.ReasonDependenciesReady, WriteStatus: true, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"claimed and out of sync": {
			reason: "template metadata edits reach a claimed Sandbox, on its version",
			claim:  claim(old),
			found: func(c *extv1beta1.SandboxClaim) ClaimFound {
				sb := owned(c)
				sb.Spec.PodTemplate.ObjectMeta.Labels["stale"] = "yes"
				return ClaimFound{Pool: cp, Sandbox: sb}
			},
			want: summary{Steps: []string{"Update Sandbox claim-a on 30"}, Status: agentsv1beta1.ReasonDependenciesReady, WriteStatus: true, Launch: agentsv1beta1.SandboxLaunchTypeCold},
		},
		"no config in force": {
			reason: "without a render config in force nothing is rendered, and nothing written",
			claim:  claim(old),
			found:  func(*extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, NoConfig: true} },
			want:   summary{},
		},
		"expired: marked first": {
			reason: "the first expired pass only marks the claim, with upstream's event, and comes back at once",
			claim:  claim(old, expired(extv1beta1.ShutdownPolicyDelete, false)),
			found:  func(*extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp} },
			want: summary{Status: extv1beta1.ClaimExpiredReason, WriteStatus: true, Requeue: time.Millisecond,
				StatusEvents: []string{"Normal " + extv1beta1.ClaimExpiredReason}},
		},
		"expired: Delete": {
			reason: "the claim goes, in the background, and its Sandbox with it",
			claim:  claim(old, expired(extv1beta1.ShutdownPolicyDelete, true)),
			found:  func(c *extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Sandbox: owned(c)} },
			want:   summary{Steps: []string{"Delete SandboxClaim claim-a uid-a Background"}},
		},
		"expired: DeleteForeground": {
			reason: "the claim goes once its Sandbox and Pod are gone",
			claim:  claim(old, expired(extv1beta1.ShutdownPolicyDeleteForeground, true)),
			found:  func(c *extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Sandbox: owned(c)} },
			want:   summary{Steps: []string{"Delete SandboxClaim claim-a uid-a Foreground"}},
		},
		"expired: Retain": {
			reason: "the claim's Sandbox goes, the claim stays marked (its status already says so)",
			claim:  claim(old, expired(extv1beta1.ShutdownPolicyRetain, true)),
			found:  func(c *extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Sandbox: owned(c)} },
			want:   summary{Steps: []string{"Delete Sandbox claim-a sb-uid"}, Status: extv1beta1.ClaimExpiredReason},
		},
		"expired: Retain, not ours": {
			reason: "a Sandbox of the claim's name it does not control is left alone, and said",
			claim:  claim(old, expired(extv1beta1.ShutdownPolicyRetain, true)),
			found:  func(*extv1beta1.SandboxClaim) ClaimFound { return ClaimFound{Pool: cp, Named: foreign} },
			want:   summary{Status: extv1beta1.ClaimExpiredReason, WriteStatus: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := PlanClaim(tc.claim, tc.found(tc.claim), planNow, tc.opts)
			got := summary{WriteStatus: plan.WriteStatus, Requeue: plan.RequeueAfter.Duration, Launch: plan.LaunchType}
			for _, s := range plan.Steps {
				got.Steps = append(got.Steps, describeStep(s))
				if s.Intent != nil && (s.Intent.Object.GetObjectKind().GroupVersionKind().Kind == "" || s.Intent.Object.GetName() != s.Name) {
					t.Errorf("%s: step %v carries an intent without its kind or of another name", tc.reason, s)
				}
			}
			if plan.Status != nil {
				if c := findCond(plan.Status.Conditions, agentsv1beta1.ConditionReady); c != nil {
					got.Status = c.Reason
				}
				if plan.WriteStatus && (plan.StatusPrecondition == nil || plan.StatusPrecondition.ResourceVersion != tc.claim.ResourceVersion) {
					t.Errorf("%s: the status is not written on the claim's version: %+v", tc.reason, plan.StatusPrecondition)
				}
			}
			for _, e := range plan.StatusEvents {
				got.StatusEvents = append(got.StatusEvents, e.Type+" "+e.Reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// describeStep is a step in one line: action, kind, name, and its precondition and conflict
// handling.
func describeStep(s Step) string {
	parts := []string{string(s.Action), s.Kind, s.Name}
	if p := s.Precondition; p != nil {
		switch {
		case p.CreateOnly:
			parts = append(parts, "create-only")
		case p.ResourceVersion != "":
			parts = append(parts, "on "+p.ResourceVersion)
		case p.UID != "":
			parts = append(parts, string(p.UID))
		}
	}
	if s.Propagation != nil {
		parts = append(parts, string(*s.Propagation))
	}
	if s.OnConflict != conflictSkip {
		parts = append(parts, string(s.OnConflict))
	}
	return strings.Join(parts, " ")
}

// TestClaimFoundSaw: what a conflict's read adds to a claim's pass: a lost member as it now is,
// or gone; the object in the way of a create.
func TestClaimFoundSaw(t *testing.T) {
	tpl := poolTemplate("python:3.12")
	pool := testPool(2, "")
	m1, m2 := member(pool, tpl, "m1", time.Minute, ready), member(pool, tpl, "m2", time.Minute, ready)
	changed := m1.DeepCopy()
	changed.ResourceVersion = "8"
	adopt := Step{Action: ActionAdopt, Kind: agentsv1beta1.SandboxKind, Name: "m1"}
	create := Step{Action: ActionCreate, Kind: agentsv1beta1.SandboxKind, Name: "claim-a"}
	cases := map[string]struct {
		step        Step
		obj         Object
		wantMembers []string
		wantNamed   string
	}{
		"a member changed":      {step: adopt, obj: changed, wantMembers: []string{"m1@8", "m2@7"}},
		"a member gone":         {step: adopt, obj: nil, wantMembers: []string{"m2@7"}},
		"a name taken":          {step: create, obj: m2, wantMembers: []string{"m1@7", "m2@7"}, wantNamed: "m2"},
		"a name free after all": {step: create, obj: nil, wantMembers: []string{"m1@7", "m2@7"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := ClaimFound{Members: []*agentsv1beta1.Sandbox{m1, m2}}
			f.Saw(tc.step, tc.obj)
			var members []string
			for _, m := range f.Members {
				members = append(members, m.Name+"@"+m.ResourceVersion)
			}
			named := ""
			if f.Named != nil {
				named = f.Named.Name
			}
			if diff := cmp.Diff([]any{tc.wantMembers, tc.wantNamed}, []any{members, named}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestWrittenEvent: a pass records one event for the steps that wrote, within the API server's
// note limit.
func TestWrittenEvent(t *testing.T) {
	step := func(reason, msg string) Step {
		e := normalEvent(reason, msg)
		return Step{Event: &e}
	}
	var many []Step
	for i := range 300 {
		many = append(many, step("Created", fmt.Sprintf("Created Sandbox %q", fmt.Sprintf("pool-%05d", i))))
	}
	cases := map[string]struct {
		steps []Step
		want  *Event
	}{
		"none":      {},
		"no events": {steps: []Step{{}, {}}},
		"one":       {steps: []Step{step("Created", `Created Pod "a"`)}, want: &Event{Type: "Normal", Reason: "Created", Message: `Created Pod "a"`}},
		"several":   {steps: []Step{{}, step("Deleted", `Deleted Sandbox "x" (Stale)`), step("Created", `Created Sandbox "y"`)}, want: &Event{Type: "Normal", Reason: "Deleted", Message: `Deleted Sandbox "x" (Stale); Created Sandbox "y"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WrittenEvent(tc.steps)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	got := WrittenEvent(many)
	if len(got.Message) > eventNoteLimit || !strings.HasPrefix(got.Message, `Created Sandbox "pool-00000"; `) || !strings.Contains(got.Message, " more") {
		t.Errorf("300 creates: %d bytes: %s", len(got.Message), got.Message)
	}
}
