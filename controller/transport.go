package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// applyTransport sends server-side applies and reads back only whether they succeeded. The
// object applied comes back through the watch anyway; controller-runtime's client decodes every
// answer (a whole Pod, as JSON) into the request's map, which was 7% of the controller's CPU at
// 1,000 Sandboxes. The body is the apply configuration as JSON; answers come as protobuf where
// the kind has it.
type applyTransport struct {
	mgr    ctrl.Manager
	codecs serializer.CodecFactory

	mu        sync.Mutex
	endpoints map[schema.GroupVersionKind]applyEndpoint
}

type applyEndpoint struct {
	client     rest.Interface
	resource   string
	namespaced bool
}

func newApplyTransport(mgr ctrl.Manager) *applyTransport {
	return &applyTransport{mgr: mgr, codecs: serializer.NewCodecFactory(mgr.GetScheme()), endpoints: map[schema.GroupVersionKind]applyEndpoint{}}
}

// apply sends config as a forced apply of manager.
func (t *applyTransport) apply(ctx context.Context, config map[string]any, manager string) error {
	u := &unstructured.Unstructured{Object: config}
	e, err := t.endpoint(u.GroupVersionKind())
	if err != nil {
		return err
	}
	body, err := json.Marshal(config)
	if err != nil {
		return err
	}
	return e.client.Patch(types.ApplyPatchType).
		NamespaceIfScoped(u.GetNamespace(), e.namespaced).
		Resource(e.resource).
		Name(u.GetName()).
		VersionedParams(&metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true)}, metav1.ParameterCodec).
		Body(body).
		Do(ctx).
		Error()
}

func (t *applyTransport) endpoint(gvk schema.GroupVersionKind) (applyEndpoint, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.endpoints[gvk]; ok {
		return e, nil
	}
	mapping, err := t.mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return applyEndpoint{}, fmt.Errorf("finding the resource of %s: %w", gvk, err)
	}
	// The typed client speaks protobuf for built-in kinds: the API server encodes its answer (the
	// whole object, unread here) more cheaply than as JSON, and an error's Status still decodes
	// with its reason and message.
	c, err := apiutil.RESTClientForGVK(gvk, false, false, t.mgr.GetConfig(), t.codecs, t.mgr.GetHTTPClient())
	if err != nil {
		return applyEndpoint{}, err
	}
	e := applyEndpoint{client: c, resource: mapping.Resource.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
	t.endpoints[gvk] = e
	return e, nil
}
