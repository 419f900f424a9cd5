package render

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// NetworkPolicyName is the name of a template's NetworkPolicy.
func NetworkPolicyName(template string) string { return template + networkPolicySuffix }

// NetworkPolicyOf is the template whose NetworkPolicy has that name (NetworkPolicyName's
// inverse); false for a name it never gives.
func NetworkPolicyOf(policy string) (string, bool) {
	return strings.CutSuffix(policy, networkPolicySuffix)
}

// TemplateNetworkPolicy is the NetworkPolicy a SandboxTemplate implies, or nil when its
// networkPolicyManagement is Unmanaged (a controller then deletes one the template owns). It
// selects the template's pods by their sandbox-template-ref-hash label and always names both
// policy types. networkPolicy unset means the secure default; set (even to {}) means its rules
// verbatim, an empty direction denying everything.
func TemplateNetworkPolicy(t *extv1beta1.SandboxTemplate, opts Options) *networkingv1.NetworkPolicy {
	if t.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyManagementUnmanaged {
		return nil
	}
	selector := map[string]string{agentsv1beta1.SandboxTemplateRefHashLabel: NameHash(t.Name)}
	var spec networkingv1.NetworkPolicySpec
	if t.Spec.NetworkPolicy == nil {
		spec = opts.Policies.NetworkPolicy.DefaultSpec(selector)
	} else {
		custom := t.Spec.NetworkPolicy.DeepCopy()
		defaultPortProtocols(custom)
		spec = networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     custom.Ingress,
			Egress:      custom.Egress,
		}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            NetworkPolicyName(t.Name),
			Namespace:       t.Namespace,
			OwnerReferences: controllerRef(extv1beta1.GroupVersion, extv1beta1.SandboxTemplateKind, t),
		},
		Spec: spec,
	}
}

// usesSecureDefaultPolicy reports whether a template's pods run under the secure-default
// NetworkPolicy, which is what turns on upstream's DNS override.
func usesSecureDefaultPolicy(t *extv1beta1.SandboxTemplate) bool {
	m := t.Spec.NetworkPolicyManagement
	return (m == "" || m == extv1beta1.NetworkPolicyManagementManaged) && t.Spec.NetworkPolicy == nil
}

// validateTemplate checks a template the way ValidateSandbox checks a Sandbox (the children of
// every Sandbox made from it must be creatable) and applies the policy packs to a copy of its
// pod spec, so a violation is reported once, on the template, rather than on every claim.
func validateTemplate(t *extv1beta1.SandboxTemplate, opts Options) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if len(t.Spec.PodTemplate.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("podTemplate", "spec", "containers"), "a template needs at least one container"))
	}
	errs = append(errs, ValidatePodTemplate(&t.Spec.PodTemplate, t.Spec.VolumeClaimTemplates, spec.Child("podTemplate"))...)
	errs = append(errs, validateVolumeClaimTemplateNames(t.Spec.VolumeClaimTemplates, spec.Child("volumeClaimTemplates"))...)
	if t.Spec.NetworkPolicyManagement != extv1beta1.NetworkPolicyManagementUnmanaged {
		errs = append(errs, validateNetworkPolicyRules(t.Spec.NetworkPolicy, spec.Child("networkPolicy"))...)
		// An invalid template name is reported on the template itself; a valid one may still be
		// too long once the suffix is added.
		np := NetworkPolicyName(t.Name)
		for _, msg := range validation.IsDNS1123Subdomain(np) {
			if len(validation.IsDNS1123Subdomain(t.Name)) > 0 {
				break
			}
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), t.Name, fmt.Sprintf("the template's NetworkPolicy is named %q: %s", np, msg)))
		}
	}
	pod := t.Spec.PodTemplate.Spec.DeepCopy()
	errs = append(errs, opts.Policies.Packs.ApplyPod(pod, spec.Child("podTemplate", "spec"))...)
	return errs
}

// TemplateFound is what a controller found in the cluster for one template's pass.
type TemplateFound struct {
	// NetworkPolicy is the NetworkPolicy under the template's policy name, nil if none.
	NetworkPolicy *networkingv1.NetworkPolicy
	// Reported is the refusal this controller last reported on the template in an event, if the
	// refusal still stands: a pass retried with backoff on the same refusal does not report it
	// again.
	Reported string
}

// TemplatePlan is one pass over a template (see Plan): its NetworkPolicy. A template has no
// status; we write nothing into it (upstream's self-label is a deliberate deviation).
type TemplatePlan struct {
	Plan[NoStatus] `json:",inline"`
}

// PlanTemplate decides what a controller does with a template's NetworkPolicy, given the one
// found under its name: apply the rendered policy (create, or bring an owned one back to the
// rendered spec), delete an owned one when the template is Unmanaged, and refuse to touch a
// policy another owner controls, with upstream's message, reported once in a Warning event and
// retried with backoff, as upstream does.
//
// Deliberate deviation: an unowned policy that selects the template's pods by its
// template-ref-hash (an earlier render applied by a GitOps tool, which cannot know UIDs) is
// adopted; upstream refuses every policy it does not control.
func PlanTemplate(t *extv1beta1.SandboxTemplate, found TemplateFound, opts Options) *TemplatePlan {
	// Nobody's Sandbox waits on the template's policy: it applies to Pods whenever it comes.
	plan := &TemplatePlan{Plan: Plan[NoStatus]{Background: true}}
	want := TemplateNetworkPolicy(t, opts)
	have := found.NetworkPolicy
	owned := have != nil && templateOwns(t, have)
	const kind = "NetworkPolicy"
	switch {
	case want == nil && owned:
		plan.Steps = append(plan.Steps, deleteStep(kind, have, appliedEvent(ActionDelete, kind, have.Name)))
	case want == nil:
	case have == nil:
		plan.Steps = append(plan.Steps, createStep(kind, want, appliedEvent(ActionCreate, kind, want.Name)))
	case owned && !equality.Semantic.DeepEqual(have.Spec, want.Spec):
		plan.Steps = append(plan.Steps, Step{Action: actionUpdate, Kind: kind, Name: want.Name,
			Intent: &Intent{Object: want, Drifted: true}, Event: appliedEvent(actionUpdate, kind, want.Name)})
	case owned:
	case metav1.GetControllerOfNoCopy(have) == nil &&
		have.Spec.PodSelector.MatchLabels[agentsv1beta1.SandboxTemplateRefHashLabel] == NameHash(t.Name):
		plan.Steps = append(plan.Steps, Step{Action: ActionAdopt, Kind: kind, Name: want.Name,
			Intent: &Intent{Object: want}, Event: appliedEvent(ActionAdopt, kind, want.Name)})
	default:
		plan.Error = fmt.Sprintf("refusing to update NetworkPolicy %q as it is not controlled by SandboxTemplate %q", have.Name, t.Name)
		if plan.Error != found.Reported {
			plan.Events = append(plan.Events, warningEvent("NetworkPolicyConflict", plan.Error))
		}
	}
	return plan
}

func templateOwns(t *extv1beta1.SandboxTemplate, obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && t.UID != "" && ref.UID == t.UID
}

// defaultPortProtocols sets protocol TCP on every port that names none, as the API server does
// when it stores a NetworkPolicy (upstream spec §10). The rule lists are atomic for server-side
// apply, so a controller owns them with the server's defaults in: rendering them defaulted keeps
// the preview equal to the stored object and an unchanged policy from being applied again.
func defaultPortProtocols(np *extv1beta1.NetworkPolicySpec) {
	set := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				tcp := corev1.ProtocolTCP
				ports[i].Protocol = &tcp
			}
		}
	}
	for i := range np.Ingress {
		set(np.Ingress[i].Ports)
	}
	for i := range np.Egress {
		set(np.Egress[i].Ports)
	}
}
