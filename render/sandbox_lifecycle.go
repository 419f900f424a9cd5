package render

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// ExpiryStep is where a Sandbox stands in upstream's two-pass expiry protocol.
type ExpiryStep string

const (
	// NotExpired: reconcile normally.
	NotExpired ExpiryStep = "NotExpired"
	// MarkExpired: the first expired pass only writes Ready=False/SandboxExpired (see
	// markExpiredStatus) and comes back at once.
	MarkExpired ExpiryStep = "MarkExpired"
	// cleanUp: the Sandbox was marked; delete the owned Pod and Service, then either delete the
	// Sandbox (shutdownPolicy Delete) or keep it with a stripped status (retainExpiredStatus).
	cleanUp ExpiryStep = "CleanUp"
)

// ExpiryDecision is what a controller does in this pass about an object's lifecycle: a
// Sandbox's shutdownTime (Expiry) or a claim's (ClaimExpiry).
type ExpiryDecision struct {
	Step ExpiryStep `json:"step"`
	// DeleteSandbox is set on cleanUp when the Sandbox goes: a Sandbox's shutdownPolicy Delete,
	// or a claim's Retain, under which the claim stays.
	DeleteSandbox bool `json:"deleteSandbox,omitempty"`
	// DeleteClaim is set on a claim's cleanUp under Delete or DeleteForeground: the claim goes,
	// with this propagation.
	DeleteClaim metav1.DeletionPropagation `json:"deleteClaim,omitempty"`
	// RequeueAfter is when to look again: at expiry while not expired (a Sandbox's not sooner
	// than 2s), and 1ms after marking.
	RequeueAfter metav1.Duration `json:"requeueAfter,omitzero"`
}

// expiry decides, given the time, what upstream's expiry check does with sb.
func expiry(sb *agentsv1beta1.Sandbox, now time.Time) ExpiryDecision {
	if sb.Spec.ShutdownTime == nil {
		return ExpiryDecision{Step: NotExpired}
	}
	if !Expired(sb, now) {
		return ExpiryDecision{Step: NotExpired, RequeueAfter: metav1.Duration{Duration: max(sb.Spec.ShutdownTime.Sub(now), 2*time.Second)}}
	}
	if !markedExpired(sb) {
		return ExpiryDecision{Step: MarkExpired, RequeueAfter: metav1.Duration{Duration: time.Millisecond}}
	}
	p := sb.Spec.ShutdownPolicy
	return ExpiryDecision{Step: cleanUp, DeleteSandbox: p != nil && *p == agentsv1beta1.ShutdownPolicyDelete}
}

func markedExpired(sb *agentsv1beta1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	return c != nil && c.Reason == agentsv1beta1.ReasonSandboxExpired
}

// markExpiredStatus is the status of the first expired pass: everything kept, Ready set to
// SandboxExpired, PodScheduled dropped (the Pod is about to go), Finished kept.
func markExpiredStatus(sb *agentsv1beta1.Sandbox, now metav1.Time) agentsv1beta1.SandboxStatus {
	st := *sb.Status.DeepCopy()
	markExpired(&st, sb.Generation, now)
	return st
}

// retainExpiredStatus is the status of a Retain-expired Sandbox once its Pod and Service are
// deleted: only the conditions survive (the Service fields, selector, podIPs and nodeName go), and
// Ready is SandboxExpired.
func retainExpiredStatus(sb *agentsv1beta1.Sandbox, now metav1.Time) agentsv1beta1.SandboxStatus {
	st := agentsv1beta1.SandboxStatus{Conditions: sb.Status.DeepCopy().Conditions}
	setExpiredReady(&st, sb.Generation, now)
	return st
}

func markExpired(st *agentsv1beta1.SandboxStatus, generation int64, now metav1.Time) {
	setExpiredReady(st, generation, now)
	meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.ConditionPodScheduled)
}

func setExpiredReady(st *agentsv1beta1.SandboxStatus, generation int64, now metav1.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               agentsv1beta1.ConditionReady,
		Status:             metav1.ConditionFalse,
		ObservedGeneration: generation,
		LastTransitionTime: now,
		Reason:             agentsv1beta1.ReasonSandboxExpired,
		Message:            "Sandbox has expired",
	})
}

// ChildAction is what the controller does with one observed child of a Sandbox.
type ChildAction string

const (
	// actionNone leaves the object as it is.
	actionNone ChildAction = "None"
	// ActionCreate creates the rendered object.
	ActionCreate ChildAction = "Create"
	// actionUpdate brings an owned object to the rendered state (for a Pod: metadata only).
	actionUpdate ChildAction = "Update"
	// ActionAdopt sets the controller reference on an unowned object, then updates it.
	ActionAdopt ChildAction = "Adopt"
	// ActionDelete deletes an owned object.
	ActionDelete ChildAction = "Delete"
)

// podAction decides what happens to the Sandbox's Pod given the Pod observed under its name (nil
// if none). Running: create a missing Pod, sync an owned one, adopt an unowned one that carries
// the adoptable or name-hash label, refuse anything else with upstream's error. Suspended: delete
// an owned Pod that is not already terminating; never touch a Pod that is not ours.
func podAction(sb *agentsv1beta1.Sandbox, pod metav1.Object) (ChildAction, error) {
	suspended := sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended
	if pod == nil {
		if suspended {
			return actionNone, nil
		}
		return ActionCreate, nil
	}
	own := ownershipOf(pod, sb)
	if suspended {
		if own == ownedBySandbox && pod.GetDeletionTimestamp() == nil {
			return ActionDelete, nil
		}
		return actionNone, nil
	}
	return existingChildAction("pod", pod, sb, own)
}

// pvcAction decides what happens to one PVC of the Sandbox: create it when missing, never
// update an owned one, adopt an unowned one under the adoption rules, refuse a foreign one.
func pvcAction(sb *agentsv1beta1.Sandbox, pvc metav1.Object) (ChildAction, error) {
	if pvc == nil {
		return ActionCreate, nil
	}
	own := ownershipOf(pvc, sb)
	if own == ownedBySandbox {
		return actionNone, nil
	}
	return existingChildAction("PVC", pvc, sb, own)
}

// serviceAction decides what happens to the Sandbox's headless Service (§2.6 of the upstream
// spec): true creates, fixes and adopts; unset keeps an owned Service and ignores an unowned one;
// false deletes an owned one. An unowned Service is only adopted when headless.
func serviceAction(sb *agentsv1beta1.Sandbox, svc metav1.Object, clusterIP string) (ChildAction, error) {
	mode := serviceMode(sb.Spec.Service)
	if svc == nil {
		if mode == serviceApply {
			return ActionCreate, nil
		}
		return actionNone, nil
	}
	own := ownershipOf(svc, sb)
	switch {
	case mode == serviceDelete && own == ownedBySandbox:
		return ActionDelete, nil
	case mode == serviceDelete:
		return actionNone, nil
	case own == ownedBySandbox:
		return actionUpdate, nil
	case own == unowned && mode == serviceKeep:
		return actionNone, nil
	}
	action, err := existingChildAction("service", svc, sb, own)
	if err == nil && action == ActionAdopt && clusterIP != "None" && clusterIP != "" {
		return actionNone, fmt.Errorf("cannot adopt service %q: ClusterIP is %q (expected %q, field is immutable)", svc.GetName(), clusterIP, "None")
	}
	return action, err
}

func existingChildAction(what string, obj metav1.Object, sb *agentsv1beta1.Sandbox, own ownership) (ChildAction, error) {
	switch own {
	case ownedBySandbox:
		return actionUpdate, nil
	case ownedByOther:
		ref := metav1.GetControllerOfNoCopy(obj)
		return actionNone, fmt.Errorf("%s %q is owned by %s/%s (UID: %s), not by sandbox %q",
			what, obj.GetName(), ref.Kind, ref.Name, ref.UID, sb.Name)
	}
	if !canAdopt(obj, sb) {
		return actionNone, fmt.Errorf("cannot adopt unowned %s %q: missing required pool authorization label (%q) or sandbox tracking label (%q)",
			what, obj.GetName(), agentsv1beta1.SandboxAdoptableLabel, agentsv1beta1.SandboxNameHashLabel)
	}
	return ActionAdopt, nil
}

// Expiring is what a render previewing opts.Now does with a Sandbox whose shutdownTime has come:
// a controller has by then deleted its Pod and Service (the PVCs and a standalone NetworkPolicy
// stay), and under shutdownPolicy Delete the Sandbox itself, and with it, through garbage
// collection, everything it owned. It reports whether sb has expired at opts.Now and whether it
// is then gone altogether.
func Expiring(sb *agentsv1beta1.Sandbox, opts Options) (expired, deleted bool) {
	if opts.Now == nil || !Expired(sb, *opts.Now) {
		return false, false
	}
	p := sb.Spec.ShutdownPolicy
	return true, p != nil && *p == agentsv1beta1.ShutdownPolicyDelete
}
