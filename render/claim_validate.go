package render

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// ValidateClaim checks what the claim CRD's CEL rules say and what the Pod a claim's env reaches
// would be refused for, since a render does not run CEL and never creates the Pod: each env entry
// has a name a Pod's env var may have and exactly one of value and valueFrom, a valueFrom exactly
// one of secretKeyRef and configMapKeyRef, and the reference a Secret or ConfigMap name and a key
// the API server accepts in a Pod.
func ValidateClaim(c *extv1beta1.SandboxClaim) field.ErrorList {
	var errs field.ErrorList
	envPath := field.NewPath("spec", "env")
	for i, e := range c.Spec.Env {
		p := envPath.Index(i)
		// The Pod's rule (k8s.io/kubernetes validateEnvVarName, RelaxedEnvironmentVariableValidation
		// locked on): printable ASCII other than '=', not empty. The claim's schema only says string.
		for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
		}
		switch {
		case e.Value != nil && e.ValueFrom != nil:
			errs = append(errs, field.Forbidden(p.Child("valueFrom"), "may not be set together with value: exactly one of value and valueFrom must be set"))
		case e.Value == nil && e.ValueFrom == nil:
			errs = append(errs, field.Required(p.Child("value"), "exactly one of value and valueFrom must be set"))
		}
		if e.ValueFrom == nil {
			continue
		}
		from := p.Child("valueFrom")
		s, cm := e.ValueFrom.SecretKeyRef, e.ValueFrom.ConfigMapKeyRef
		switch {
		case s != nil && cm != nil:
			errs = append(errs, field.Forbidden(from.Child("configMapKeyRef"), "may not be set together with secretKeyRef: exactly one of secretKeyRef and configMapKeyRef must be set"))
		case s == nil && cm == nil:
			errs = append(errs, field.Required(from.Child("secretKeyRef"), "exactly one of secretKeyRef and configMapKeyRef must be set"))
		}
		if s != nil {
			errs = append(errs, validateEnvKeyRef(from.Child("secretKeyRef"), "Secret", s.Name, s.Key)...)
		}
		if cm != nil {
			errs = append(errs, validateEnvKeyRef(from.Child("configMapKeyRef"), "ConfigMap", cm.Name, cm.Key)...)
		}
	}
	return errs
}
