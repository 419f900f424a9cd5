package render

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// Object is a rendered child: a typed Kubernetes object with its TypeMeta set.
type Object interface {
	metav1.Object
	runtime.Object
}

// Child is a rendered object and the object it was rendered from, for messages that must name
// both (for example two Sandboxes whose PVC names collide).
type Child struct {
	Object
	// Parent is the source object, as "Kind namespace/name".
	Parent string
}

// Input is every defaulted v1beta1 object a render sees.
type Input struct {
	Sandboxes []*agentsv1beta1.Sandbox
}

// Render computes the children a declarative render emits for every object of in. All invalid
// objects are reported together (as InvalidErrors joined with errors.Join) and no children are
// returned then: a render either succeeds whole or writes nothing.
func Render(in *Input, opts Options) ([]Child, error) {
	var out []Child
	var errs []error
	// Work in name order so that errors, and which of two colliding children is reported first,
	// do not depend on input order.
	sandboxes := slices.Clone(in.Sandboxes)
	slices.SortFunc(sandboxes, func(a, b *agentsv1beta1.Sandbox) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, sb := range sandboxes {
		c, err := Sandbox(sb, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parent := describe(agentsv1beta1.SandboxKind, sb.Namespace, sb.Name)
		for _, o := range c.Objects() {
			out = append(out, Child{Object: o, Parent: parent})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
