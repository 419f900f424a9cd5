package bundle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Warning is a finding that does not stop a render: the object and field it is about, and why.
type Warning struct {
	Kind, Namespace, Name, Field, Message string
}

func (w Warning) String() string {
	obj := w.Kind + " " + w.Name
	if w.Namespace != "" {
		obj = w.Kind + " " + w.Namespace + "/" + w.Name
	}
	return obj + ": " + w.Field + ": " + w.Message
}

// warnings are every finding of a render of b that does not stop it, sorted: the Sandboxes a
// preview at opts.Now renders past their shutdownTime (expiryWarnings) and the templates whose
// own NetworkPolicy surprises (networkPolicyWarnings). The CLI, the function and the golden tests
// all report these, through Expansion.Warnings.
func warnings(b *manifest.Bundle, opts render.Options) []Warning {
	out := append(expiryWarnings(b, opts), networkPolicyWarnings(b, opts)...)
	slices.SortFunc(out, func(a, b Warning) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// expiryWarnings names every Sandbox that a preview at opts.Now renders as a controller leaves it
// after its shutdownTime, so a reviewer sees why its Pod and Service (or the Sandbox itself) are
// missing. Nothing without opts.Now.
func expiryWarnings(b *manifest.Bundle, opts render.Options) []Warning {
	if opts.Now == nil {
		return nil
	}
	var out []Warning
	for _, sb := range b.Sandboxes {
		expired, deleted := render.Expiring(sb, opts)
		if !expired {
			continue
		}
		what := "its Pod and Service are not rendered (its PVCs stay)"
		if deleted {
			what = "shutdownPolicy is Delete, so neither it nor anything it owns is rendered"
		}
		out = append(out, Warning{Kind: "Sandbox", Namespace: sb.Namespace, Name: sb.Name, Field: "spec.shutdownTime",
			Message: fmt.Sprintf("%s has passed at the preview's time %s: %s", sb.Spec.ShutdownTime.UTC().Format(time.RFC3339), opts.Now.UTC().Format(time.RFC3339), what)})
	}
	return out
}

// networkPolicyWarnings are render.TemplateNetworkPolicyWarnings for every SandboxTemplate of b:
// a template's own policy, rendered as upstream renders it, that refuses the router, allows no
// DNS to Pods that use it, or denies everything.
func networkPolicyWarnings(b *manifest.Bundle, opts render.Options) []Warning {
	var out []Warning
	for _, t := range b.Templates {
		for _, w := range render.TemplateNetworkPolicyWarnings(t, opts) {
			out = append(out, Warning{Kind: extv1beta1.SandboxTemplateKind, Namespace: t.Namespace, Name: t.Name, Field: w.Field, Message: w.Message})
		}
	}
	return out
}
