package render

import (
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// ObservedChildren is what a controller found in the cluster for one Sandbox.
type ObservedChildren struct {
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
}

// Step is one write the controller makes, in order.
type Step struct {
	Action ChildAction `json:"action"`
	Kind   string      `json:"kind"`
	Name   string      `json:"name"`
	// Intent is what the controller applies for Create, Update and Adopt (nil for Delete).
	Intent *Intent `json:"-"`
}

// Intent is the desired state of one child as a server-side apply controller sends it. Scope
// says which fields the intent decides: none means the whole object (a create, or a child that
// is kept exactly as rendered); otherwise only the listed fields, and every other field the
// controller already manages must be sent again unchanged, or server-side apply would remove
// it. That is how upstream's "a Pod's spec is never updated, only its metadata" is kept: the
// intent of an existing Pod is scoped to its metadata.
type Intent struct {
	Object Object
	// Scope lists field paths ("metadata.labels", "spec.selector") owned by this intent.
	Scope []string
	// Drifted says the child is kept exactly as rendered and the observed one differs from
	// Object in what the render checks. When the controller's own apply configuration is
	// already what it owns, the difference is another manager's (a rule list added to a
	// deny-all policy, a port appended): an apply cannot remove what someone else owns, so the
	// controller replaces the spec instead, as upstream's drift fix does.
	Drifted bool
}

// Scoped field paths of partial intents.
const (
	ScopeLabels          = "metadata.labels"
	ScopeAnnotations     = "metadata.annotations"
	ScopeOwnerReferences = "metadata.ownerReferences"
	ScopeSelector        = "spec.selector"
)

// SandboxPlan is everything a controller does in one pass over a Sandbox, decided here so the
// controller only executes it: the expiry decision, the child writes in upstream's order (PVCs,
// Pod, Service), whether the Sandbox itself is deleted, and the status to write afterwards.
type SandboxPlan struct {
	Expiry ExpiryDecision `json:"expiry"`
	Steps  []Step         `json:"steps,omitempty"`
	// Children is the rendered desired state the steps apply (nil when the Sandbox is invalid or
	// expiring).
	Children *SandboxChildren `json:"-"`
	// Status is the status after the pass; nil when the Sandbox is deleted.
	Status *agentsv1beta1.SandboxStatus `json:"status,omitempty"`
	// Pod is the Sandbox's Pod as the status saw it (for StatusHold), nil if none.
	Pod *corev1.Pod `json:"-"`

	// before is what Status was computed from, with the children this plan creates taken out:
	// the state a refused write leaves (see FailedStatus).
	before *Observation `json:"-"`
}

// FailedStatus is the status of a pass in which the API server refused one of the plan's writes
// (admission, a quota, an invalid child): as upstream reports any error of a pass, Ready is
// False with reason ReconcilerError and message "Error seen: <err>"; the other fields and
// conditions are computed from the children as they were before the pass, since a refused
// create made nothing. Nil when the plan has no status of its own to amend (an invalid or
// expiring Sandbox: the error is only retried).
func (p *SandboxPlan) FailedStatus(sb *agentsv1beta1.Sandbox, err error, now metav1.Time, opts Options) *agentsv1beta1.SandboxStatus {
	if p.before == nil || err == nil {
		return nil
	}
	obs := *p.before
	if obs.MultiplePods {
		return nil // Ready already reports the ambiguity, upstream's first error
	}
	obs.Err = errors.Join(obs.Err, err)
	st := ActiveStatus(sb, obs, now, opts)
	return &st
}

// PlanSandbox decides one controller pass over sb, given what was observed and the time. It
// follows upstream's reconcile: the two-pass expiry protocol first, else PVCs, Pod and Service,
// then conditions computed from the objects as they will be after the writes (so a Pod created in
// this pass reports "Pod exists with phase: ", as upstream's does).
func PlanSandbox(sb *agentsv1beta1.Sandbox, obs ObservedChildren, now metav1.Time, opts Options) *SandboxPlan {
	plan := &SandboxPlan{Expiry: Expiry(sb, now.Time)}
	switch plan.Expiry.Step {
	case MarkExpired:
		st := MarkExpiredStatus(sb, now)
		plan.Status = &st
		return plan
	case CleanUp:
		// A child already terminating (a Pod in its grace period) is not deleted again: the
		// delete would change nothing and cost a write and an event every pass until it is gone.
		if pod, _ := resolvePod(sb, obs.Pods); pod != nil && OwnershipOf(pod, sb) == OwnedBySandbox && pod.DeletionTimestamp == nil {
			plan.Steps = append(plan.Steps, Step{ActionDelete, "Pod", pod.Name, nil})
		}
		if obs.Service != nil && OwnershipOf(obs.Service, sb) == OwnedBySandbox && obs.Service.DeletionTimestamp == nil {
			plan.Steps = append(plan.Steps, Step{ActionDelete, "Service", obs.Service.Name, nil})
		}
		if plan.Expiry.DeleteSandbox {
			plan.Steps = append(plan.Steps, Step{ActionDelete, agentsv1beta1.SandboxKind, sb.Name, nil})
			return plan
		}
		st := RetainExpiredStatus(sb, now)
		plan.Status = &st
		return plan
	}

	children, err := Sandbox(sb, opts)
	if err != nil {
		st := ActiveStatus(sb, Observation{Err: err}, now, opts)
		plan.Status = &st
		return plan
	}
	plan.Children = children
	var result Observation
	var errs []error

	// PVCs, in template order; the first error stops the rest, as upstream's loop does.
	for _, want := range children.PVCs {
		var found *corev1.PersistentVolumeClaim
		for _, p := range obs.PVCs {
			if p.Name == want.Name {
				found = p
			}
		}
		var got metav1.Object
		if found != nil {
			got = found
		}
		action, err := PVCAction(sb, got)
		if err != nil {
			errs = append(errs, err)
			break
		}
		switch action {
		case ActionCreate:
			plan.Steps = append(plan.Steps, Step{action, "PersistentVolumeClaim", want.Name, &Intent{Object: want}})
		case ActionAdopt:
			// Upstream's adoption only adds the controller reference; a PVC is never updated.
			// Deliberate deviation: the name-hash label comes with it. A controller caches only
			// children that carry it, and a PVC adopted through the adoptable label alone would
			// stay invisible to it: every later pass would try to create it again.
			hash := map[string]string{agentsv1beta1.SandboxNameHashLabel: want.Labels[agentsv1beta1.SandboxNameHashLabel]}
			plan.Steps = append(plan.Steps, Step{action, "PersistentVolumeClaim", want.Name,
				&Intent{Object: metadataIntent(want, hash, nil), Scope: []string{ScopeLabels, ScopeOwnerReferences}}})
		}
	}

	// The Pod.
	pod, podErr := resolvePod(sb, obs.Pods)
	switch {
	case podErr != nil:
		result.MultiplePods = true
		errs = append(errs, podErr)
	case obs.PodUnknown:
		result.PodUnknown = true
	default:
		var got metav1.Object
		if pod != nil {
			got = pod
		}
		action, err := PodAction(sb, got)
		switch {
		case err != nil:
			errs = append(errs, err)
		case action == ActionCreate:
			plan.Steps = append(plan.Steps, Step{action, "Pod", children.Pod.Name, &Intent{Object: children.Pod}})
			result.Pod = children.Pod
		case action == ActionNone && pod == nil:
		default:
			if action == ActionUpdate && podMetadataInSync(pod, sb) {
				action = ActionNone
			}
			switch action {
			case ActionUpdate, ActionAdopt:
				// Only the metadata of an existing Pod is kept in sync (upstream #581, #612).
				// children.Pod is set: only a running Sandbox's Pod is updated or adopted.
				want := children.Pod
				intent := metadataIntent(want, want.Labels, want.Annotations)
				intent.SetName(pod.Name)
				plan.Steps = append(plan.Steps, Step{action, "Pod", pod.Name,
					&Intent{Object: intent, Scope: []string{ScopeLabels, ScopeAnnotations, ScopeOwnerReferences}}})
			case ActionDelete:
				plan.Steps = append(plan.Steps, Step{action, "Pod", pod.Name, nil})
			}
			result.Pod = pod
			if action == ActionAdopt {
				result.Pod = adopted(pod, sb)
			}
		}
	}

	// The Service, unless the Pod is ambiguous: upstream leaves it for an operator then.
	if !result.MultiplePods {
		var got metav1.Object
		clusterIP := ""
		if obs.Service != nil {
			got = obs.Service
			clusterIP = obs.Service.Spec.ClusterIP
		}
		action, err := ServiceAction(sb, got, clusterIP)
		if err != nil {
			errs = append(errs, err)
		}
		switch action {
		case ActionCreate:
			plan.Steps = append(plan.Steps, Step{action, "Service", children.Service.Name, &Intent{Object: children.Service}})
			result.Service = children.Service
		case ActionUpdate, ActionAdopt:
			if action == ActionAdopt || !serviceInSync(obs.Service, children.Service, children.ServiceMode) {
				intent := serviceIntent(children)
				intent.Drifted = action == ActionUpdate && len(intent.Scope) == 0
				plan.Steps = append(plan.Steps, Step{action, "Service", obs.Service.Name, intent})
			}
			result.Service = obs.Service
		case ActionDelete:
			plan.Steps = append(plan.Steps, Step{action, "Service", obs.Service.Name, nil})
		}
	}

	// The standalone-network-policy pack's NetworkPolicy.
	if step, err := networkPolicyStep(sb, children.NetworkPolicy, obs.NetworkPolicy); err != nil {
		errs = append(errs, err)
	} else if step != nil {
		plan.Steps = append(plan.Steps, *step)
	}

	result.Err = errors.Join(errs...)
	if result.MultiplePods {
		// Ready reports only the ambiguity: upstream finds that error in the joined ones first.
		result.Err = podErr
	}
	st := ActiveStatus(sb, result, now, opts)
	plan.Status = &st
	plan.Pod = result.Pod
	before := result
	before.Pod = pod // as observed: not yet created, adopted or updated
	for _, s := range plan.Steps {
		if s.Action == ActionCreate && s.Kind == "Service" {
			before.Service = nil
		}
	}
	plan.before = &before
	return plan
}

// resolvePod finds "the" Pod of a Sandbox as upstream does: among the Pods carrying its
// name-hash label and controlled by it, exactly one wins over the name; more than one is an
// error; none means the Pod under the pod name (possibly someone else's).
func resolvePod(sb *agentsv1beta1.Sandbox, pods []*corev1.Pod) (*corev1.Pod, error) {
	hash := NameHash(sb.Name)
	var mine []*corev1.Pod
	for _, p := range pods {
		if p.Labels[agentsv1beta1.SandboxNameHashLabel] == hash && OwnershipOf(p, sb) == OwnedBySandbox {
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
func PodToReadByName(sb *agentsv1beta1.Sandbox, obs ObservedChildren) (string, bool) {
	if sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended || obs.PodUnknown || len(obs.Pods) > 0 {
		return "", false
	}
	name := podName(sb)
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", false
	}
	return name, true
}

type multiplePodsError int

func (n multiplePodsError) Error() string { return MultiplePodsMessage(int(n)) }

// adopted is the observed Pod as it will be once the controller has set its controller reference.
func adopted(pod *corev1.Pod, sb *agentsv1beta1.Sandbox) *corev1.Pod {
	p := pod.DeepCopy()
	p.OwnerReferences = append(p.OwnerReferences, sandboxOwnerRefs(sb)...)
	return p
}

// podMetadataInSync reports whether an owned Pod already carries the metadata SyncPodMetadata
// would give it, so the controller writes nothing.
func podMetadataInSync(pod *corev1.Pod, sb *agentsv1beta1.Sandbox) bool {
	labels, annotations := SyncPodMetadata(pod, sb)
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
	return mode != ServiceApply || equality.Semantic.DeepEqual(have.Spec.Ports, want.Spec.Ports)
}

// serviceIntent is what is applied to an existing Service: the whole rendered Service when
// spec.service is true; when it is unset only what upstream fixes on a Service it keeps (the
// name-hash label and the selector; the ports are left alone).
func serviceIntent(c *SandboxChildren) *Intent {
	if c.ServiceMode == ServiceApply {
		return &Intent{Object: c.Service}
	}
	want := metadataIntent(c.Service, map[string]string{agentsv1beta1.SandboxNameHashLabel: c.Service.Labels[agentsv1beta1.SandboxNameHashLabel]}, nil)
	svc := want.(*corev1.Service)
	svc.Spec.Selector = maps.Clone(c.Service.Spec.Selector)
	return &Intent{Object: svc, Scope: []string{ScopeLabels, ScopeOwnerReferences, ScopeSelector}}
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
		if have != nil && OwnershipOf(have, sb) == OwnedBySandbox {
			return &Step{ActionDelete, "NetworkPolicy", have.Name, nil}, nil
		}
		return nil, nil
	}
	if have == nil {
		return &Step{ActionCreate, "NetworkPolicy", want.Name, &Intent{Object: want}}, nil
	}
	action, err := existingChildAction("NetworkPolicy", have, sb, OwnershipOf(have, sb))
	if err != nil {
		return nil, err
	}
	if action == ActionUpdate && networkPolicyInSync(have, want) {
		return nil, nil
	}
	return &Step{action, "NetworkPolicy", want.Name, &Intent{Object: want, Drifted: action == ActionUpdate}}, nil
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
func (s Step) String() string { return fmt.Sprintf("%s %s %s", s.Action, s.Kind, s.Name) }
