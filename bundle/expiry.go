package bundle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// ExpiryWarnings names every Sandbox that a preview at opts.Now renders as a controller leaves it
// after its shutdownTime, so a reviewer sees why its Pod and Service (or the Sandbox itself) are
// missing. Nothing without opts.Now, or for input Expand rejects.
func ExpiryWarnings(objs []*unstructured.Unstructured, opts render.Options) []Warning {
	if opts.Now == nil {
		return nil
	}
	b, err := manifest.Decode(objs)
	if err != nil {
		return nil
	}
	var out []Warning
	for _, sb := range b.Input().Sandboxes {
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
	slices.SortFunc(out, func(a, b Warning) int { return strings.Compare(a.String(), b.String()) })
	return out
}
