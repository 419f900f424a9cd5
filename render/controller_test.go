package render

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

func testTemplate(mgmt extv1beta1.NetworkPolicyManagement, custom *extv1beta1.NetworkPolicySpec) *extv1beta1.SandboxTemplate {
	return &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "python", Namespace: "default", UID: "t-uid"},
		Spec:       extv1beta1.SandboxTemplateSpec{NetworkPolicyManagement: mgmt, NetworkPolicy: custom},
	}
}

func TestPlanTemplate(t *testing.T) {
	managed := testTemplate(extv1beta1.NetworkPolicyManagementManaged, nil)
	rendered := TemplateNetworkPolicy(managed, Options{})
	drifted := rendered.DeepCopy()
	drifted.Spec.Egress = nil
	gitops := rendered.DeepCopy()
	gitops.OwnerReferences = nil
	foreign := rendered.DeepCopy()
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "other", Controller: ptr.To(true)}}
	unrelated := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "python-network-policy", Namespace: "default"}}

	cases := map[string]struct {
		reason   string
		template *extv1beta1.SandboxTemplate
		have     *networkingv1.NetworkPolicy
		reported string
		want     *Step
		wantErr  string
		// wantEvent is the reason of the Warning the pass records, if any.
		wantEvent string
	}{
		"create": {
			reason: "a Managed template without a policy gets the rendered one", template: managed,
			want: &Step{Action: ActionCreate, Kind: "NetworkPolicy", Name: "python-network-policy"},
		},
		"in sync": {
			reason: "an owned policy equal to the render is left alone", template: managed, have: rendered,
		},
		"drift": {
			reason: "an owned policy that drifted is brought back", template: managed, have: drifted,
			want: &Step{Action: actionUpdate, Kind: "NetworkPolicy", Name: "python-network-policy"},
		},
		"earlier render adopted": {
			reason: "an unowned policy selecting the template's pods is an earlier GitOps render", template: managed, have: gitops,
			want: &Step{Action: ActionAdopt, Kind: "NetworkPolicy", Name: "python-network-policy"},
		},
		"foreign refused": {
			reason: "another controller's policy is never touched", template: managed, have: foreign,
			wantErr:   `refusing to update NetworkPolicy "python-network-policy" as it is not controlled by SandboxTemplate "python"`,
			wantEvent: "NetworkPolicyConflict",
		},
		"refusal reported once": {
			reason: "the retries of a refusal already reported record no event", template: managed, have: foreign,
			reported: `refusing to update NetworkPolicy "python-network-policy" as it is not controlled by SandboxTemplate "python"`,
			wantErr:  `refusing to update NetworkPolicy "python-network-policy" as it is not controlled by SandboxTemplate "python"`,
		},
		"unrelated refused": {
			reason: "an unowned policy that selects something else is someone else's", template: managed, have: unrelated,
			wantErr:   `refusing to update NetworkPolicy "python-network-policy" as it is not controlled by SandboxTemplate "python"`,
			wantEvent: "NetworkPolicyConflict",
		},
		"unmanaged deletes owned": {
			reason: "Unmanaged removes the policy the template owns", template: testTemplate(extv1beta1.NetworkPolicyManagementUnmanaged, nil), have: rendered,
			want: &Step{Action: ActionDelete, Kind: "NetworkPolicy", Name: "python-network-policy"},
		},
		"unmanaged leaves foreign": {
			reason: "Unmanaged never deletes someone else's policy", template: testTemplate(extv1beta1.NetworkPolicyManagementUnmanaged, nil), have: gitops,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := PlanTemplate(tc.template, TemplateFound{NetworkPolicy: tc.have, Reported: tc.reported}, Options{})
			if plan.Error != tc.wantErr {
				t.Fatalf("%s: error %q, want %q", tc.reason, plan.Error, tc.wantErr)
			}
			gotEvent := ""
			for _, e := range plan.Events {
				gotEvent = e.Reason
			}
			if gotEvent != tc.wantEvent {
				t.Errorf("%s: event %q, want %q", tc.reason, gotEvent, tc.wantEvent)
			}
			var got *Step
			if len(plan.Steps) > 1 {
				t.Fatalf("%s: %d steps", tc.reason, len(plan.Steps))
			} else if len(plan.Steps) == 1 {
				got = &plan.Steps[0]
			}
			if got != nil {
				if got.Action != ActionDelete && (got.Intent == nil || got.Intent.Object.GetName() != got.Name) {
					t.Errorf("%s: step %v carries no intent for its object", tc.reason, got)
				}
				got = &Step{Action: got.Action, Kind: got.Kind, Name: got.Name}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: PlanTemplate (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestStatusNeedsWrite(t *testing.T) {
	ready := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: s, Reason: "R", Message: "m"}}
	}
	cases := map[string]struct {
		reason     string
		prev, next agentsv1beta1.SandboxStatus
		want       bool
	}{
		"equal":         {reason: "nothing changed", prev: agentsv1beta1.SandboxStatus{Conditions: ready("False")}, next: agentsv1beta1.SandboxStatus{Conditions: ready("False")}},
		"condition":     {reason: "a condition changed", prev: agentsv1beta1.SandboxStatus{Conditions: ready("False")}, next: agentsv1beta1.SandboxStatus{Conditions: ready("True")}, want: true},
		"only node":     {reason: "a node name alone waits for the next write while not Ready", prev: agentsv1beta1.SandboxStatus{Conditions: ready("False")}, next: agentsv1beta1.SandboxStatus{Conditions: ready("False"), NodeName: "n1"}},
		"node on ready": {reason: "a node name is written at once when Ready", prev: agentsv1beta1.SandboxStatus{Conditions: ready("True")}, next: agentsv1beta1.SandboxStatus{Conditions: ready("True"), NodeName: "n1"}, want: true},
		"node and ips":  {reason: "a node name with another change is written", prev: agentsv1beta1.SandboxStatus{Conditions: ready("False")}, next: agentsv1beta1.SandboxStatus{Conditions: ready("False"), NodeName: "n1", PodIPs: []string{"10.0.0.1"}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sandboxStatusChanged(&tc.prev, &tc.next); got != tc.want {
				t.Errorf("%s: StatusNeedsWrite = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestPlanIntents checks what a controller is told to apply: whole objects for creates and for a
// Service kept as rendered (marked drifted when it differs), and for an existing Pod only its
// metadata (upstream never updates a Pod's spec), for a kept Service only the label and selector
// upstream fixes, and for an adopted PVC only the owner reference and the name-hash label.
func TestPlanIntents(t *testing.T) {
	now := metav1.Now()
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default", UID: types.UID("sb-uid"), Generation: 1},
		Spec: agentsv1beta1.SandboxSpec{
			SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
				PodTemplate: agentsv1beta1.PodTemplate{
					ObjectMeta: agentsv1beta1.PodMetadata{Labels: map[string]string{"app": "x"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				},
			},
		},
	}
	children, err := Sandbox(sb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stalePod := children.Pod.DeepCopy()
	stalePod.Labels = map[string]string{agentsv1beta1.SandboxNameHashLabel: NameHash("box")}
	stalePod.Spec.Containers[0].Image = "old"
	keptSvc := children.Service.DeepCopy()
	keptSvc.Spec.Selector = map[string]string{"other": "x"}
	withService := sb.DeepCopy()
	withService.Spec.Service = ptr.To(true)
	serviceChildren, err := Sandbox(withService, Options{})
	if err != nil {
		t.Fatal(err)
	}
	portAdded := serviceChildren.Service.DeepCopy()
	portAdded.Spec.Ports = append(portAdded.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 7777})
	adoptablePVC := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-box", Namespace: "default",
		Labels: map[string]string{agentsv1beta1.SandboxAdoptableLabel: "true"}}}
	withPVC := sb.DeepCopy()
	withPVC.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"}}}

	type want struct {
		Action ChildAction
		Kind   string
		Scope  []string
		Labels map[string]string
		Spec   bool
		// Drifted: the observed child differs from the whole intent.
		Drifted bool
	}
	cases := map[string]struct {
		reason string
		sb     *agentsv1beta1.Sandbox
		obs    SandboxFound
		want   []want
	}{
		"create": {
			reason: "a new Sandbox creates its whole Pod", sb: sb,
			want: []want{{Action: ActionCreate, Kind: "Pod", Labels: children.Pod.Labels, Spec: true}},
		},
		"pod metadata only": {
			reason: "an existing Pod gets its metadata, never its spec", sb: sb, obs: SandboxFound{Pods: []*corev1.Pod{stalePod}},
			want: []want{{Action: actionUpdate, Kind: "Pod", Scope: []string{scopeLabels, scopeAnnotations, scopeOwnerReferences}, Labels: children.Pod.Labels}},
		},
		"kept service": {
			reason: "a kept Service (spec.service unset) gets only its label and selector fixed", sb: sb,
			obs: SandboxFound{Pods: []*corev1.Pod{children.Pod}, Service: keptSvc},
			want: []want{{Action: actionUpdate, Kind: "Service", Scope: []string{scopeLabels, scopeOwnerReferences, scopeSelector},
				Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: NameHash("box")}, Spec: true}},
		},
		"drifted service": {
			reason: "a Service kept as rendered (spec.service true) with a port another manager added is applied whole, marked drifted", sb: withService,
			obs:  SandboxFound{Pods: []*corev1.Pod{serviceChildren.Pod}, Service: portAdded},
			want: []want{{Action: actionUpdate, Kind: "Service", Labels: serviceChildren.Service.Labels, Spec: true, Drifted: true}},
		},
		"adopted pvc": {
			reason: "an adoptable PVC gains the owner reference and the name-hash label, which a controller's cache selects children by", sb: withPVC,
			obs: SandboxFound{Pods: []*corev1.Pod{children.Pod}, PVCs: []*corev1.PersistentVolumeClaim{adoptablePVC}},
			want: []want{
				{Action: ActionAdopt, Kind: "PersistentVolumeClaim", Scope: []string{scopeLabels, scopeOwnerReferences},
					Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: NameHash("box")}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := PlanSandbox(tc.sb, tc.obs, now, Options{})
			var got []want
			for _, s := range plan.Steps {
				w := want{Action: s.Action, Kind: s.Kind, Scope: s.Intent.Scope, Labels: s.Intent.Object.GetLabels(), Drifted: s.Intent.Drifted}
				switch o := s.Intent.Object.(type) {
				case *corev1.Pod:
					w.Spec = len(o.Spec.Containers) > 0
				case *corev1.Service:
					w.Spec = len(o.Spec.Selector) > 0
				}
				if refs := s.Intent.Object.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "sb-uid" {
					t.Errorf("%s: %s intent owner references %v, want the Sandbox's", tc.reason, s.Kind, refs)
				}
				got = append(got, w)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: intents (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestStatusHold(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: created}}
	status := func(reason string, scheduled metav1.ConditionStatus) *agentsv1beta1.SandboxStatus {
		st := &agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}}
		if scheduled != "" {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionPodScheduled, Status: scheduled})
		}
		return st
	}
	ready := &agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonDependenciesReady}}}
	newPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created.Add(30 * time.Second))}}
	cases := map[string]struct {
		reason string
		pod    *corev1.Pod
		next   *agentsv1beta1.SandboxStatus
		at     time.Duration
		want   time.Duration
	}{
		"starting":      {reason: "a normal start waits", next: status(agentsv1beta1.ReasonDependenciesNotReady, metav1.ConditionTrue), at: 3 * time.Second, want: 27 * time.Second},
		"window over":   {reason: "a slow start is reported", next: status(agentsv1beta1.ReasonDependenciesNotReady, ""), at: 31 * time.Second},
		"ready":         {reason: "Ready is written at once", next: ready, at: time.Second},
		"error":         {reason: "errors are written at once", next: status(agentsv1beta1.ReasonReconcilerError, ""), at: time.Second},
		"unschedulable": {reason: "an unschedulable Pod is news", next: status(agentsv1beta1.ReasonDependenciesNotReady, metav1.ConditionFalse), at: time.Second},
		"recreated pod": {reason: "the window restarts with a new Pod", pod: newPod, next: status(agentsv1beta1.ReasonDependenciesNotReady, ""), at: 32 * time.Second, want: 28 * time.Second},
		"suspended":     {reason: "suspension is written at once", next: status(agentsv1beta1.ReasonSandboxSuspended, ""), at: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sandboxStatusHold(sb, tc.pod, tc.next, created.Add(tc.at)); got != tc.want {
				t.Errorf("%s: StatusHold = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
	t.Run("pod lost", func(t *testing.T) {
		wasReady := sb.DeepCopy()
		wasReady.Status = *ready.DeepCopy()
		if got := sandboxStatusHold(wasReady, newPod, status(agentsv1beta1.ReasonDependenciesNotReady, metav1.ConditionTrue), created.Add(32*time.Second)); got != 0 {
			t.Errorf("a Ready Sandbox whose Pod was replaced: StatusHold = %v, want 0 (the loss is written at once)", got)
		}
	})
}

// TestSandboxBackground: which Sandbox passes may wait behind the passes somebody waits on.
func TestSandboxBackground(t *testing.T) {
	cond := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: s, Reason: "R"}}
	}
	pool := []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: extv1beta1.SandboxWarmPoolKind, Name: "p", UID: "p", Controller: ptr.To(true)}}
	cases := map[string]struct {
		reason        string
		member        bool
		before, after metav1.ConditionStatus
		want          bool
	}{
		"ready stays ready":   {reason: "a re-sync nobody waits on", before: metav1.ConditionTrue, after: metav1.ConditionTrue, want: true},
		"starting":            {reason: "somebody waits for a start", before: metav1.ConditionFalse, after: metav1.ConditionTrue},
		"pod lost":            {reason: "the loss of a Ready Sandbox's Pod is written first", before: metav1.ConditionTrue, after: metav1.ConditionFalse},
		"member starting":     {reason: "a refill nobody waits on", member: true, before: metav1.ConditionFalse, after: metav1.ConditionTrue, want: true},
		"member lost its pod": {reason: "a Ready member's loss too, whatever owns it", member: true, before: metav1.ConditionTrue, after: metav1.ConditionFalse},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
			sb.Status.Conditions = cond(tc.before)
			if tc.member {
				sb.Labels = map[string]string{agentsv1beta1.SandboxWarmPoolLabel: "h"}
				sb.OwnerReferences = pool
			}
			next := &agentsv1beta1.SandboxStatus{Conditions: cond(tc.after)}
			if got := sandboxBackground(sb, next); got != tc.want {
				t.Errorf("%s: sandboxBackground = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestRefused: a pass whose write the API server refused reports it as upstream reports any
// error of a pass, with the rest of the status as the children were before the pass, and a
// Warning event with it.
func TestRefused(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default", UID: types.UID("sb-uid"), Generation: 1},
		Spec: agentsv1beta1.SandboxSpec{
			SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}, Service: ptr.To(true)},
		},
	}
	children, err := Sandbox(sb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	running := children.Pod.DeepCopy()
	running.Spec.NodeName = "node-a"
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	invalid := sb.DeepCopy()
	invalid.Spec.PodTemplate.Spec.Containers = nil
	expiring := sb.DeepCopy()
	expiring.Spec.ShutdownTime = &metav1.Time{Time: now.Add(-time.Hour)}
	refused := errors.New(`applying Pod "box": pods "box" is forbidden: violates PodSecurity "restricted:latest"`)

	type summary struct {
		Reason, Message string
		PodScheduled    bool
		PodIPs          []string
		Service         string
	}
	cases := map[string]struct {
		reason string
		sb     *agentsv1beta1.Sandbox
		obs    SandboxFound
		err    error
		want   *summary
	}{
		"refused pod create": {
			reason: "nothing was made: no PodScheduled condition, no IPs, no Service", sb: sb, err: refused,
			want: &summary{Reason: agentsv1beta1.ReasonReconcilerError, Message: "Error seen: " + refused.Error()},
		},
		"refused service create": {
			reason: "the running Pod still shows; the Service that was refused does not", sb: sb,
			obs: SandboxFound{Pods: []*corev1.Pod{running}}, err: refused,
			want: &summary{Reason: agentsv1beta1.ReasonReconcilerError, Message: "Error seen: " + refused.Error(), PodScheduled: true, PodIPs: []string{"10.0.0.7"}},
		},
		"no error":         {reason: "nothing to amend", sb: sb},
		"invalid sandbox":  {reason: "its status already names the render error", sb: invalid, err: refused},
		"expiring sandbox": {reason: "the expiry status stands; the delete is retried", sb: expiring, err: refused},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var st *agentsv1beta1.SandboxStatus
			if p := PlanSandbox(tc.sb, tc.obs, now, Options{}).Refused(tc.err); p != nil {
				if !p.WriteStatus || len(p.StatusEvents) != 1 || p.StatusEvents[0].Reason != agentsv1beta1.ReasonReconcilerError {
					t.Errorf("%s: the refusal's status is not written with its Warning: %+v", tc.reason, p)
				}
				st = p.Status
			}
			var got *summary
			if st != nil {
				ready := findCond(st.Conditions, agentsv1beta1.ConditionReady)
				got = &summary{PodIPs: st.PodIPs, Service: st.Service, PodScheduled: findCond(st.Conditions, agentsv1beta1.ConditionPodScheduled) != nil}
				if ready != nil {
					got.Reason, got.Message = ready.Reason, ready.Message
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func findCond(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
