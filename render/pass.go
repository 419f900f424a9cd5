package render

import (
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
}

// Step is one write the controller makes, in order.
type Step struct {
	Action ChildAction `json:"action"`
	Kind   string      `json:"kind"`
	Name   string      `json:"name"`
}

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
		if pod, _ := resolvePod(sb, obs.Pods); pod != nil && OwnershipOf(pod, sb) == OwnedBySandbox {
			plan.Steps = append(plan.Steps, Step{ActionDelete, "Pod", pod.Name})
		}
		if obs.Service != nil && OwnershipOf(obs.Service, sb) == OwnedBySandbox {
			plan.Steps = append(plan.Steps, Step{ActionDelete, "Service", obs.Service.Name})
		}
		if plan.Expiry.DeleteSandbox {
			plan.Steps = append(plan.Steps, Step{ActionDelete, agentsv1beta1.SandboxKind, sb.Name})
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
		if action != ActionNone {
			plan.Steps = append(plan.Steps, Step{action, "PersistentVolumeClaim", want.Name})
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
			plan.Steps = append(plan.Steps, Step{action, "Pod", children.Pod.Name})
			result.Pod = children.Pod
		case action == ActionNone && pod == nil:
		default:
			if action == ActionUpdate && podMetadataInSync(pod, sb) {
				action = ActionNone
			}
			if action != ActionNone {
				plan.Steps = append(plan.Steps, Step{action, "Pod", pod.Name})
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
			plan.Steps = append(plan.Steps, Step{action, "Service", children.Service.Name})
			result.Service = children.Service
		case ActionUpdate, ActionAdopt:
			if action == ActionAdopt || !serviceInSync(obs.Service, children.Service, children.ServiceMode) {
				plan.Steps = append(plan.Steps, Step{action, "Service", obs.Service.Name})
			}
			result.Service = obs.Service
		case ActionDelete:
			plan.Steps = append(plan.Steps, Step{action, "Service", obs.Service.Name})
		}
	}

	result.Err = errors.Join(errs...)
	if result.MultiplePods {
		// Ready reports only the ambiguity: upstream finds that error in the joined ones first.
		result.Err = podErr
	}
	st := ActiveStatus(sb, result, now, opts)
	plan.Status = &st
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
	name := sb.Annotations[agentsv1beta1.SandboxPodNameAnnotation]
	if name == "" {
		name = sb.Name
	}
	for _, p := range pods {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, nil
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

// String makes a step readable in logs and events.
func (s Step) String() string { return fmt.Sprintf("%s %s %s", s.Action, s.Kind, s.Name) }
