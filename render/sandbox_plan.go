package render

import (
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// SandboxFound is what a controller found in the cluster for one Sandbox's pass: its children.
type SandboxFound struct {
	// Pods are the Pods that carry the Sandbox's name-hash label, plus the Pod under the
	// Sandbox's pod name (the agents.x-k8s.io/pod-name annotation, else the Sandbox name) if that
	// one exists without the label.
	Pods []*corev1.Pod
	// PodUnknown is set when listing or getting the Pods failed.
	PodUnknown bool
	// Service is the Service named after the Sandbox, if any.
	Service *corev1.Service
	// PVCs are the PVCs found under the names of the Sandbox's volume claim templates.
	PVCs []*corev1.PersistentVolumeClaim
	// NetworkPolicy is the NetworkPolicy under the name the standalone-network-policy pack gives
	// the Sandbox (StandaloneNetworkPolicyName), if any.
	NetworkPolicy *networkingv1.NetworkPolicy
	// Annotations are upstream's annotations this controller applied to the Sandbox that the
	// Sandbox as read may not show yet (a cache behind its writes).
	Annotations map[string]string
}

// Saw adds what the API server holds under a step's name, read after the step met a conflict or
// before a create the cache may not show yet: a child of the Sandbox (nil: nothing).
func (f *SandboxFound) Saw(_ Step, obj Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		f.Pods = append(f.Pods, o)
	case *corev1.Service:
		f.Service = o
	case *corev1.PersistentVolumeClaim:
		f.PVCs = append(f.PVCs, o)
	case *networkingv1.NetworkPolicy:
		f.NetworkPolicy = o
	}
}

// SandboxPlan is one pass over a Sandbox (see Plan): the expiry decision, the child writes in
// upstream's order (PVCs, Pod, Service, the standalone NetworkPolicy) or the Sandbox's own
// deletion, and the status to write afterwards.
type SandboxPlan struct {
	Plan[agentsv1beta1.SandboxStatus] `json:",inline"`
	Expiry                            ExpiryDecision `json:"expiry"`
	// Children is the rendered desired state the steps apply (nil when the Sandbox is invalid or
	// expiring).
	Children *SandboxChildren `json:"-"`
	// Pod is the Sandbox's Pod as the status saw it, nil if none.
	Pod *corev1.Pod `json:"-"`

	// refused is what a refused write's status is computed from (see Refused).
	refused *refusedPass `json:"-"`
}

// refusedPass is what Refused needs: the state a refused write leaves (what Status was computed
// from, with the children this plan creates taken out), and the pass's Sandbox, time and
// options.
type refusedPass struct {
	before sandboxStatusInputs
	sb     *agentsv1beta1.Sandbox
	now    metav1.Time
	opts   Options
}

// sandboxSettle is how soon a Sandbox pass whose writes the watch has not brought back comes
// back anyway (SettleAfterWrites).
const sandboxSettle = time.Second

// Refused is the rest of a pass in which the API server refused one of the plan's writes
// (admission, a quota, an invalid child): as upstream reports any error of a pass, Ready is
// False with reason ReconcilerError and message "Error seen: <err>"; the other fields and
// conditions are computed from the children as they were before the pass, since a refused
// create made nothing. Nil when the plan has no status of its own to amend (an invalid or
// expiring Sandbox: the error is only retried).
func (p *SandboxPlan) Refused(err error) *Plan[agentsv1beta1.SandboxStatus] {
	if p.refused == nil || err == nil {
		return nil
	}
	r := p.refused
	in := r.before
	if in.MultiplePods {
		return nil // Ready already reports the ambiguity, upstream's first error
	}
	in.Err = errors.Join(in.Err, err)
	st := activeStatus(r.sb, in, r.now, r.opts)
	out := &Plan[agentsv1beta1.SandboxStatus]{}
	setSandboxStatus(out, r.sb, &st)
	return out
}

// PlanSandbox decides one controller pass over sb, given what was found and the time. It follows
// upstream's reconcile: the two-pass expiry protocol first, else PVCs, Pod and Service, then
// conditions computed from the objects as they will be after the writes (so a Pod created in
// this pass reports "Pod exists with phase: ", as upstream's does). The status of a normal start
// is held (sandboxStatusHold); upstream's pod-name annotation, when asked for, comes after it.
func PlanSandbox(sb *agentsv1beta1.Sandbox, found SandboxFound, now metav1.Time, opts Options) *SandboxPlan {
	plan := &SandboxPlan{Expiry: expiry(sb, now.Time)}
	plan.requeue(plan.Expiry.RequeueAfter.Duration)
	plan.SettleAfterWrites.Duration = sandboxSettle
	switch plan.Expiry.Step {
	case MarkExpired:
		st := markExpiredStatus(sb, now)
		setSandboxStatus(&plan.Plan, sb, &st)
	case cleanUp:
		plan.cleanUp(sb, found, now)
	default:
		plan.reconcile(sb, found, now, opts)
	}
	if plan.Status != nil {
		plan.upstreamAnnotations(sb, found, opts)
		plan.Background = sandboxBackground(sb, plan.Status)
	}
	return plan
}

// reconcile is the pass of a Sandbox that has not expired: its children, then its status.
func (p *SandboxPlan) reconcile(sb *agentsv1beta1.Sandbox, found SandboxFound, now metav1.Time, opts Options) {
	plan := p
	children, err := Sandbox(sb, opts)
	if err != nil {
		st := activeStatus(sb, sandboxStatusInputs{Err: err}, now, opts)
		setSandboxStatus(&plan.Plan, sb, &st)
		return
	}
	plan.Children = children
	var in sandboxStatusInputs
	var errs []error
	errs = plan.pvcSteps(sb, found, errs)
	pod, podErr := resolvePod(sb, found.Pods)
	errs = plan.podStep(sb, found, pod, podErr, &in, errs)
	if !in.MultiplePods {
		// The Service, unless the Pod is ambiguous: upstream leaves it for an operator then.
		errs = plan.serviceStep(sb, found, &in, errs)
	}
	if step, err := networkPolicyStep(sb, children.NetworkPolicy, found.NetworkPolicy); err != nil {
		errs = append(errs, err)
	} else if step != nil {
		plan.Steps = append(plan.Steps, *step)
	}
	in.Err = errors.Join(errs...)
	if in.MultiplePods {
		// Ready reports only the ambiguity: upstream finds that error in the joined ones first.
		in.Err = podErr
	}
	plan.active(sb, in, pod, now, opts)
}

// sandboxBackground says nobody waits on a Sandbox's pass: it is Ready before the pass and after
// it (a warm member just adopted, whose Pod takes the claim's labels: whoever uses it is served
// whenever the pass writes), or it is a pool member no claim has taken yet (a refill: a claim
// takes only a member that is Ready already). A Sandbox that was Ready and is not any more lost
// its Pod: that pass is never background, whoever owns the Sandbox, so that the loss is written
// before the replacement Pod is Ready.
func sandboxBackground(sb *agentsv1beta1.Sandbox, next *agentsv1beta1.SandboxStatus) bool {
	wasReady := meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	if wasReady && !meta.IsStatusConditionTrue(next.Conditions, agentsv1beta1.ConditionReady) {
		return false
	}
	if sb.Labels[agentsv1beta1.SandboxWarmPoolLabel] != "" && metav1.GetControllerOfNoCopy(sb) != nil &&
		metav1.GetControllerOfNoCopy(sb).Kind == extv1beta1.SandboxWarmPoolKind {
		return true
	}
	return wasReady && meta.IsStatusConditionTrue(next.Conditions, agentsv1beta1.ConditionReady)
}

// cleanUp is the second expired pass: the owned Pod and Service go (one already terminating is
// not deleted again: that would change nothing and cost a write and an event every pass until it
// is gone), then the Sandbox itself under shutdownPolicy Delete, else its stripped status.
func (p *SandboxPlan) cleanUp(sb *agentsv1beta1.Sandbox, found SandboxFound, now metav1.Time) {
	if pod, _ := resolvePod(sb, found.Pods); pod != nil && ownershipOf(pod, sb) == ownedBySandbox && pod.DeletionTimestamp == nil {
		p.Steps = append(p.Steps, deleteStep("Pod", pod, appliedEvent(ActionDelete, "Pod", pod.Name)))
	}
	if svc := found.Service; svc != nil && ownershipOf(svc, sb) == ownedBySandbox && svc.DeletionTimestamp == nil {
		p.Steps = append(p.Steps, deleteStep("Service", svc, appliedEvent(ActionDelete, "Service", svc.Name)))
	}
	if p.Expiry.DeleteSandbox {
		p.Steps = append(p.Steps, deleteStep(agentsv1beta1.SandboxKind, sb, appliedEvent(ActionDelete, agentsv1beta1.SandboxKind, sb.Name)))
		return
	}
	st := retainExpiredStatus(sb, now)
	setSandboxStatus(&p.Plan, sb, &st)
}

// pvcSteps creates or adopts the PVCs, in template order; the first error stops the rest, as
// upstream's loop does.
func (p *SandboxPlan) pvcSteps(sb *agentsv1beta1.Sandbox, found SandboxFound, errs []error) []error {
	for _, want := range p.Children.PVCs {
		var got metav1.Object
		for _, pvc := range found.PVCs {
			if pvc.Name == want.Name {
				got = pvc
			}
		}
		action, err := pvcAction(sb, got)
		if err != nil {
			return append(errs, err)
		}
		switch action {
		case ActionCreate:
			p.Steps = append(p.Steps, createStep("PersistentVolumeClaim", want, appliedEvent(action, "PersistentVolumeClaim", want.Name)))
		case ActionAdopt:
			// Upstream's adoption only adds the controller reference; a PVC is never updated.
			// Deliberate deviation: the name-hash label comes with it. A controller caches only
			// children that carry it, and a PVC adopted through the adoptable label alone would
			// stay invisible to it: every later pass would try to create it again.
			hash := map[string]string{agentsv1beta1.SandboxNameHashLabel: want.Labels[agentsv1beta1.SandboxNameHashLabel]}
			p.Steps = append(p.Steps, Step{Action: action, Kind: "PersistentVolumeClaim", Name: want.Name,
				Intent: &Intent{Object: metadataIntent(want, hash, nil), Scope: []string{scopeLabels, scopeOwnerReferences}},
				Event:  appliedEvent(action, "PersistentVolumeClaim", want.Name)})
		}
	}
	return errs
}

// podStep creates the Pod, keeps an existing one's metadata in sync (only the metadata: upstream
// #581, #612), adopts an unowned one, or deletes a suspended Sandbox's; in records the Pod as the
// status will see it.
func (p *SandboxPlan) podStep(sb *agentsv1beta1.Sandbox, found SandboxFound, pod *corev1.Pod, podErr error, in *sandboxStatusInputs, errs []error) []error {
	switch {
	case podErr != nil:
		in.MultiplePods = true
		return append(errs, podErr)
	case found.PodUnknown:
		in.PodUnknown = true
		return errs
	}
	var got metav1.Object
	if pod != nil {
		got = pod
	}
	action, err := podAction(sb, got)
	switch {
	case err != nil:
		return append(errs, err)
	case action == ActionCreate:
		want := p.Children.Pod
		p.Steps = append(p.Steps, createStep("Pod", want, appliedEvent(action, "Pod", want.Name)))
		in.Pod = want
		return errs
	case action == actionNone && pod == nil:
		return errs
	case action == actionUpdate && podMetadataInSync(pod, sb):
		action = actionNone
	}
	switch action {
	case actionUpdate, ActionAdopt:
		// p.Children.Pod is set: only a running Sandbox's Pod is updated or adopted.
		want := p.Children.Pod
		intent := metadataIntent(want, want.Labels, want.Annotations)
		intent.SetName(pod.Name)
		p.Steps = append(p.Steps, Step{Action: action, Kind: "Pod", Name: pod.Name,
			Intent: &Intent{Object: intent, Scope: []string{scopeLabels, scopeAnnotations, scopeOwnerReferences}},
			Event:  appliedEvent(action, "Pod", pod.Name)})
	case ActionDelete:
		p.Steps = append(p.Steps, deleteStep("Pod", pod, appliedEvent(action, "Pod", pod.Name)))
	}
	in.Pod = pod
	if action == ActionAdopt {
		in.Pod = adopted(pod, sb)
	}
	return errs
}

// serviceStep creates, fixes, adopts or deletes the Sandbox's headless Service as its
// spec.service says; in records the Service as the status will see it.
func (p *SandboxPlan) serviceStep(sb *agentsv1beta1.Sandbox, found SandboxFound, in *sandboxStatusInputs, errs []error) []error {
	var got metav1.Object
	clusterIP := ""
	if found.Service != nil {
		got = found.Service
		clusterIP = found.Service.Spec.ClusterIP
	}
	action, err := serviceAction(sb, got, clusterIP)
	if err != nil {
		errs = append(errs, err)
	}
	children := p.Children
	switch action {
	case ActionCreate:
		p.Steps = append(p.Steps, createStep("Service", children.Service, appliedEvent(action, "Service", children.Service.Name)))
		in.Service = children.Service
	case actionUpdate, ActionAdopt:
		if action == ActionAdopt || !serviceInSync(found.Service, children.Service, children.ServiceMode) {
			intent := serviceIntent(children)
			intent.Drifted = action == actionUpdate && len(intent.Scope) == 0
			p.Steps = append(p.Steps, Step{Action: action, Kind: "Service", Name: found.Service.Name, Intent: intent,
				Event: appliedEvent(action, "Service", found.Service.Name)})
		}
		in.Service = found.Service
	case ActionDelete:
		p.Steps = append(p.Steps, deleteStep("Service", found.Service, appliedEvent(action, "Service", found.Service.Name)))
	}
	return errs
}

// active is the status of a running (or suspended) Sandbox's pass, whether it is written now or
// held through a normal start, and upstream's pod-name annotation after it. A pass whose steps
// write leaves the status to the pass their watch events bring.
func (p *SandboxPlan) active(sb *agentsv1beta1.Sandbox, in sandboxStatusInputs, pod *corev1.Pod, now metav1.Time, opts Options) {
	st := activeStatus(sb, in, now, opts)
	setSandboxStatus(&p.Plan, sb, &st)
	p.Pod = in.Pod
	if hold := sandboxStatusHold(sb, in.Pod, &st, now.Time); hold > 0 && p.WriteStatus {
		// A normal start: its status waits for Ready or the end of the startup window.
		p.WriteStatus, p.StatusEvents = false, nil
		p.requeue(hold)
	}
	before := in
	before.Pod = pod // as found: not yet created, adopted or updated
	for _, s := range p.Steps {
		if s.Action == ActionCreate && s.Kind == "Service" {
			before.Service = nil
		}
	}
	p.refused = &refusedPass{before: before, sb: sb, now: now, opts: opts}
}

// upstreamAnnotations applies upstream's pod-name annotation, when asked for, once the Pod is
// found (before it is Ready), after the status: nobody waits for it.
func (p *SandboxPlan) upstreamAnnotations(sb *agentsv1beta1.Sandbox, found SandboxFound, opts Options) {
	seen := *sb // the Sandbox as far as this controller knows, with the annotations it applied
	seen.Annotations = overlay(sb.Annotations, found.Annotations)
	if ann := sandboxUpstreamAnnotations(&seen, found, opts.Upstream); ann != nil {
		p.After = append(p.After, annotationsStep(agentsv1beta1.GroupVersion.WithKind(agentsv1beta1.SandboxKind), sb.Namespace, sb.Name, ann))
	}
}

// setSandboxStatus sets a Sandbox pass's status, whether it is written, and the events of
// writing it: a Warning when an error, or upstream's MultiplePods refusal, first shows in Ready.
func setSandboxStatus(p *Plan[agentsv1beta1.SandboxStatus], sb *agentsv1beta1.Sandbox, st *agentsv1beta1.SandboxStatus) {
	p.Status = st
	p.WriteStatus = sandboxStatusChanged(&sb.Status, st)
	if !p.WriteStatus {
		return
	}
	if c := meta.FindStatusCondition(st.Conditions, agentsv1beta1.ConditionReady); c != nil &&
		(c.Reason == agentsv1beta1.ReasonReconcilerError || c.Reason == agentsv1beta1.ReasonMultiplePods) {
		old := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
		if old == nil || old.Message != c.Message {
			p.StatusEvents = append(p.StatusEvents, warningEvent(c.Reason, c.Message))
		}
	}
}

// resolvePod finds "the" Pod of a Sandbox as upstream does: among the Pods carrying its
// name-hash label and controlled by it, exactly one wins over the name; more than one is an
// error; none means the Pod under the pod name (possibly someone else's).
func resolvePod(sb *agentsv1beta1.Sandbox, pods []*corev1.Pod) (*corev1.Pod, error) {
	hash := NameHash(sb.Name)
	var mine []*corev1.Pod
	for _, p := range pods {
		if p.Labels[agentsv1beta1.SandboxNameHashLabel] == hash && ownershipOf(p, sb) == ownedBySandbox {
			mine = append(mine, p)
		}
	}
	switch len(mine) {
	case 0:
	case 1:
		return mine[0], nil
	default:
		return nil, multiplePodsError(len(mine))
	}
	name := podName(sb)
	for _, p := range pods {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, nil
}

// podName is the name of a Sandbox's Pod: the pod-name annotation, else the Sandbox's name.
func podName(sb *agentsv1beta1.Sandbox) string {
	if name := sb.Annotations[agentsv1beta1.SandboxPodNameAnnotation]; name != "" {
		return name
	}
	return sb.Name
}

// PodToReadByName names the Pod a controller must read by name before planning, because a cache
// that holds only Pods carrying the name-hash label cannot show it and no write of the pass would
// find it: the Pod under a suspended Sandbox's pod name when none of its own was observed.
// Upstream reports such a Pod, someone else's, as PodNotOwned instead of "suspended". A running
// Sandbox needs no read: its create is refused if the name is taken, and the controller reads
// the Pod then. A pod-name annotation no Pod can have names nothing to read.
func PodToReadByName(sb *agentsv1beta1.Sandbox, found SandboxFound) (string, bool) {
	if sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended || found.PodUnknown || len(found.Pods) > 0 {
		return "", false
	}
	name := podName(sb)
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", false
	}
	return name, true
}

type multiplePodsError int

func (n multiplePodsError) Error() string { return multiplePodsMessage(int(n)) }

// adopted is the observed Pod as it will be once the controller has set its controller reference.
func adopted(pod *corev1.Pod, sb *agentsv1beta1.Sandbox) *corev1.Pod {
	p := pod.DeepCopy()
	p.OwnerReferences = append(p.OwnerReferences, sandboxOwnerRefs(sb)...)
	return p
}

// podMetadataInSync reports whether an owned Pod already carries the metadata syncPodMetadata
// would give it, so the controller writes nothing.
func podMetadataInSync(pod *corev1.Pod, sb *agentsv1beta1.Sandbox) bool {
	labels, annotations := syncPodMetadata(pod, sb)
	return maps.Equal(labels, pod.Labels) && maps.Equal(annotations, pod.Annotations)
}

// serviceInSync reports whether an owned Service has the drift-checked fields upstream fixes: the
// name-hash label, exactly the name-hash selector, and (only when spec.service is true) the ports.
func serviceInSync(have, want *corev1.Service, mode ServiceMode) bool {
	if have.Labels[agentsv1beta1.SandboxNameHashLabel] != want.Labels[agentsv1beta1.SandboxNameHashLabel] {
		return false
	}
	if !maps.Equal(have.Spec.Selector, want.Spec.Selector) {
		return false
	}
	return mode != serviceApply || equality.Semantic.DeepEqual(have.Spec.Ports, want.Spec.Ports)
}

// serviceIntent is what is applied to an existing Service: the whole rendered Service when
// spec.service is true; when it is unset only what upstream fixes on a Service it keeps (the
// name-hash label and the selector; the ports are left alone).
func serviceIntent(c *SandboxChildren) *Intent {
	if c.ServiceMode == serviceApply {
		return &Intent{Object: c.Service}
	}
	want := metadataIntent(c.Service, map[string]string{agentsv1beta1.SandboxNameHashLabel: c.Service.Labels[agentsv1beta1.SandboxNameHashLabel]}, nil)
	svc := want.(*corev1.Service)
	svc.Spec.Selector = maps.Clone(c.Service.Spec.Selector)
	return &Intent{Object: svc, Scope: []string{scopeLabels, scopeOwnerReferences, scopeSelector}}
}

// metadataIntent is an object of o's kind with o's identity and owner references, and the given
// labels and annotations; everything else empty.
func metadataIntent(o Object, labels, annotations map[string]string) Object {
	meta := metav1.ObjectMeta{
		Name:            o.GetName(),
		Namespace:       o.GetNamespace(),
		Labels:          maps.Clone(labels),
		Annotations:     maps.Clone(annotations),
		OwnerReferences: o.GetOwnerReferences(),
	}
	switch o.(type) {
	case *corev1.Pod:
		return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta}
	case *corev1.Service:
		return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta}
	case *corev1.PersistentVolumeClaim:
		return &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}, ObjectMeta: meta}
	}
	panic(fmt.Sprintf("metadataIntent: unexpected %T", o))
}

// networkPolicyStep decides the standalone-network-policy pack's NetworkPolicy: apply it when
// the pack renders one (adopting an earlier render that carries the name-hash label), delete one
// the Sandbox owns when the pack is off, and never touch someone else's.
func networkPolicyStep(sb *agentsv1beta1.Sandbox, want, have *networkingv1.NetworkPolicy) (*Step, error) {
	if want == nil {
		if have != nil && ownershipOf(have, sb) == ownedBySandbox {
			s := deleteStep("NetworkPolicy", have, appliedEvent(ActionDelete, "NetworkPolicy", have.Name))
			return &s, nil
		}
		return nil, nil
	}
	if have == nil {
		s := createStep("NetworkPolicy", want, appliedEvent(ActionCreate, "NetworkPolicy", want.Name))
		return &s, nil
	}
	action, err := existingChildAction("NetworkPolicy", have, sb, ownershipOf(have, sb))
	if err != nil {
		return nil, err
	}
	if action == actionUpdate && networkPolicyInSync(have, want) {
		return nil, nil
	}
	return &Step{Action: action, Kind: "NetworkPolicy", Name: want.Name, Intent: &Intent{Object: want, Drifted: action == actionUpdate},
		Event: appliedEvent(action, "NetworkPolicy", want.Name)}, nil
}

// networkPolicyInSync reports whether an existing NetworkPolicy already has the rendered labels
// and spec.
func networkPolicyInSync(have, want *networkingv1.NetworkPolicy) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return false
		}
	}
	return equality.Semantic.DeepEqual(have.Spec, want.Spec)
}

// String makes a step readable in logs and events.
