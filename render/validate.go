package render

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// InvalidError is returned for input that cannot be rendered. It names the object and carries
// every field error found, so a user can fix all of them from one run.
type InvalidError struct {
	Kind, Namespace, Name string
	Errs                  field.ErrorList
	// Source is the input object the error is about, when the caller that found it knows which
	// of several objects of one name it is (bundle's duplicates): findings then name that copy's
	// file and document, not the first copy's. nil otherwise; callers find the object by name.
	Source *unstructured.Unstructured
}

// Object names the offending object the way kubectl does: Kind namespace/name.
func (e *InvalidError) Object() string {
	return describe(e.Kind, e.Namespace, e.Name)
}

func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		msgs[i] = fe.Error()
	}
	return e.Object() + ": " + strings.Join(msgs, "; ")
}

// ValidateSandbox checks what upstream's CRD does not, but what would make the children
// impossible to create: a Service named after a Sandbox whose name is not a DNS-1035 label, PVC
// names that are invalid or too long, volume claim templates without a name or with the same
// name, and values outside the enums (for input that never went through an API server).
func ValidateSandbox(sb *agentsv1beta1.Sandbox) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")

	for _, msg := range validation.IsDNS1123Subdomain(sb.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), sb.Name, "the Sandbox name is also the Pod name: "+msg))
	}
	if len(sb.Spec.PodTemplate.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("podTemplate", "spec", "containers"), "a Sandbox needs at least one container"))
	}
	if sb.Spec.Service != nil && *sb.Spec.Service {
		for _, msg := range validation.IsDNS1035Label(sb.Name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), sb.Name,
				"spec.service is true, so the Sandbox name is also the Service name: "+msg))
		}
	}
	errs = append(errs, ValidatePodTemplate(&sb.Spec.PodTemplate, sb.Spec.VolumeClaimTemplates, spec.Child("podTemplate"))...)
	errs = append(errs, validateVolumeClaimTemplateNames(sb.Spec.VolumeClaimTemplates, spec.Child("volumeClaimTemplates"))...)
	for i := range sb.Spec.VolumeClaimTemplates {
		name := sb.Spec.VolumeClaimTemplates[i].Name
		if name == "" {
			continue
		}
		pvc := PVCName(name, sb.Name)
		for _, msg := range validation.IsDNS1123Subdomain(pvc) {
			errs = append(errs, field.Invalid(spec.Child("volumeClaimTemplates").Index(i).Child("metadata", "name"), name, fmt.Sprintf("PVC name %q: %s", pvc, msg)))
		}
	}
	switch sb.Spec.OperatingMode {
	case "", agentsv1beta1.SandboxOperatingModeRunning, agentsv1beta1.SandboxOperatingModeSuspended:
	default:
		errs = append(errs, field.NotSupported(spec.Child("operatingMode"), sb.Spec.OperatingMode,
			[]agentsv1beta1.SandboxOperatingMode{agentsv1beta1.SandboxOperatingModeRunning, agentsv1beta1.SandboxOperatingModeSuspended}))
	}
	if p := sb.Spec.ShutdownPolicy; p != nil && *p != agentsv1beta1.ShutdownPolicyDelete && *p != agentsv1beta1.ShutdownPolicyRetain {
		errs = append(errs, field.NotSupported(spec.Child("shutdownPolicy"), *p,
			[]agentsv1beta1.ShutdownPolicy{agentsv1beta1.ShutdownPolicyDelete, agentsv1beta1.ShutdownPolicyRetain}))
	}
	return errs
}

// validateVolumeClaimTemplateNames checks that every volume claim template has a name, that names
// are unique, and that each is a valid pod volume name (a DNS-1123 label).
func validateVolumeClaimTemplateNames(vcts []agentsv1beta1.PersistentVolumeClaimTemplate, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i := range vcts {
		p := path.Index(i).Child("metadata", "name")
		name := vcts[i].Name
		if name == "" {
			errs = append(errs, field.Required(p, "the name of the pod volume and the first part of the PVC name"))
			continue
		}
		if j, dup := seen[name]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s (also %s)", name, path.Index(j).String())))
			continue
		}
		seen[name] = i
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(p, name, "pod volume name: "+msg))
		}
	}
	return errs
}

// supportedAccessModes are the PVC access modes the API server accepts.
var supportedAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod}

// ValidateVolumeClaimTemplates checks volume claim templates (of a Sandbox, a template or a
// claim) for what would make the PVCs a render makes of them impossible to create: their labels
// and annotations (apimachinery's own validation; the schema takes any map of strings), and their
// spec as k8s.io/kubernetes pkg/apis/core/validation's ValidatePersistentVolumeClaimSpec does: at
// least one access mode, each a supported one, ReadWriteOncePod alone; a storage request above
// zero; a storage class name that is a DNS-1123 subdomain; a volume mode Block or Filesystem; a
// valid selector. (Data sources are left to the API server: their rules depend on its feature
// gates.)
//
// It is for input that a render turns into PVCs to apply (manifest.Decode), not for the
// controller's Sandboxes: upstream adopts an existing PVC of the template's name whatever the
// template's spec says, so a controller must not refuse a Sandbox for it.
func ValidateVolumeClaimTemplates(vcts []agentsv1beta1.PersistentVolumeClaimTemplate, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range vcts {
		errs = append(errs, validateVolumeClaimTemplate(&vcts[i], path.Index(i))...)
	}
	return errs
}

func validateVolumeClaimTemplate(v *agentsv1beta1.PersistentVolumeClaimTemplate, path *field.Path) field.ErrorList {
	md, spec := path.Child("metadata"), path.Child("spec")
	errs := metav1validation.ValidateLabels(v.Labels, md.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(v.Annotations, md.Child("annotations"))...)
	s := &v.Spec
	if len(s.AccessModes) == 0 {
		errs = append(errs, field.Required(spec.Child("accessModes"), "at least 1 access mode is required"))
	}
	rwop, other := false, false
	for _, m := range s.AccessModes {
		switch {
		case m == corev1.ReadWriteOncePod:
			rwop = true
		case slices.Contains(supportedAccessModes, m):
			other = true
		default:
			errs = append(errs, field.NotSupported(spec.Child("accessModes"), m, supportedAccessModes))
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(spec.Child("accessModes"), "may not use ReadWriteOncePod with other access modes"))
	}
	storage := spec.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storage, "the size of the volume"))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(storage, q.String(), "must be greater than zero"))
	}
	if c := s.StorageClassName; c != nil && *c != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*c) {
			errs = append(errs, field.Invalid(spec.Child("storageClassName"), *c, msg))
		}
	}
	if m := s.VolumeMode; m != nil && *m != corev1.PersistentVolumeBlock && *m != corev1.PersistentVolumeFilesystem {
		errs = append(errs, field.NotSupported(spec.Child("volumeMode"), *m, []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}))
	}
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	return SortErrors(errs)
}
