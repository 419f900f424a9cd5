package render

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// controllerRef is the owner reference upstream writes with SetControllerReference. A GitOps
// render has no UIDs, and an owner reference without a UID is rejected by the API server, so
// callers get none when the owner's UID is unknown; garbage collection is then the job of the
// GitOps tool's pruning.
func controllerRef(gv schema.GroupVersion, kind string, owner metav1.Object) []metav1.OwnerReference {
	if owner.GetUID() == "" {
		return nil
	}
	return []metav1.OwnerReference{{
		APIVersion:         gv.String(),
		Kind:               kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
}

// sandboxOwnerRefs are the owner references of every child of sb.
func sandboxOwnerRefs(sb *agentsv1beta1.Sandbox) []metav1.OwnerReference {
	return controllerRef(agentsv1beta1.GroupVersion, agentsv1beta1.SandboxKind, sb)
}

// groupKindOf splits an owner reference's apiVersion; upstream matches owners on group and kind
// only, so a Sandbox adopted under v1alpha1 still counts.
func groupKindOf(ref *metav1.OwnerReference) (group, kind string) {
	group = ref.APIVersion
	if i := strings.IndexByte(group, '/'); i >= 0 {
		group = group[:i]
	} else {
		group = ""
	}
	return group, ref.Kind
}

// extensionPodLabels are the labels upstream copies from a Sandbox's own metadata to its Pod, and
// only when a SandboxClaim or SandboxWarmPool controls the Sandbox: the template-ref hash (which
// the template's NetworkPolicy selects on) and, for pool members, the warm-pool hash.
func extensionPodLabels(sb *agentsv1beta1.Sandbox, ctrl sandboxMaker) map[string]string {
	if !ctrl.isExtension() {
		return nil
	}
	out := map[string]string{}
	if ctrl.kind == extv1beta1.SandboxWarmPoolKind {
		if v := sb.Labels[agentsv1beta1.SandboxWarmPoolLabel]; v != "" {
			out[agentsv1beta1.SandboxWarmPoolLabel] = v
		}
	}
	if v := sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel]; v != "" {
		out[agentsv1beta1.SandboxTemplateRefHashLabel] = v
	}
	return out
}

// ownership says how an observed child relates to a Sandbox.
type ownership int

// The three relations upstream distinguishes.
const (
	// unowned objects have no controller reference.
	unowned ownership = iota
	// ownedBySandbox objects have a controller reference to this Sandbox's UID.
	ownedBySandbox
	// ownedByOther objects have a controller reference to something else.
	ownedByOther
)

// ownershipOf classifies an observed object against sb, as upstream does before it touches a
// child: it updates what it owns, adopts unowned objects only under the rules of canAdopt, and
// never touches objects another controller owns.
func ownershipOf(obj metav1.Object, sb *agentsv1beta1.Sandbox) ownership {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref == nil:
		return unowned
	case ref.UID == sb.UID && sb.UID != "":
		return ownedBySandbox
	default:
		return ownedByOther
	}
}

// canAdopt reports whether upstream would adopt an unowned object for sb: only when it was marked
// adoptable or already carries sb's name-hash label.
func canAdopt(obj metav1.Object, sb *agentsv1beta1.Sandbox) bool {
	l := obj.GetLabels()
	return l[agentsv1beta1.SandboxAdoptableLabel] == "true" || l[agentsv1beta1.SandboxNameHashLabel] == NameHash(sb.Name)
}
