package controller

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// CacheOptions keeps the cache small: only Pods, Services and PVCs that carry the
// sandbox-name-hash label (the children the render makes), and of every child's managedFields
// only this controller's own entries, which is all the applier reads. Of a Pod only the part a
// pass reads is cached (render.ObservedPod: no spec but its node, no container statuses): its
// spec is never updated. Sandboxes and templates are cached without managedFields.
func CacheOptions(opts Options) cache.Options {
	labelled, _ := labels.NewRequirement(agentsv1beta1.SandboxNameHashLabel, selection.Exists, nil)
	// Reads hand out the cached objects themselves, not copies: the reconcilers never modify
	// what they read (render is pure; writes go from copies), and a copy of every Pod on every
	// pass was most of the controller's allocations.
	shared := ptr.To(true)
	children := cache.ByObject{Label: labels.NewSelector().Add(*labelled), Transform: keepOwnManagedFields, UnsafeDisableDeepCopy: shared}
	pods := children
	pods.Transform = observedPod
	var namespaces map[string]cache.Config
	if len(opts.Namespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	return cache.Options{
		DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   pods,
			&corev1.Service{}:               children,
			&corev1.PersistentVolumeClaim{}: children,
			// Template policies carry no labels, so every NetworkPolicy is cached (few exist).
			&networkingv1.NetworkPolicy{}:   {Transform: keepOwnManagedFields, UnsafeDisableDeepCopy: shared},
			&agentsv1beta1.Sandbox{}:        {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&extv1beta1.SandboxTemplate{}:   {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&extv1beta1.SandboxClaim{}:      {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&extv1beta1.SandboxWarmPool{}:   {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&renderv1alpha1.SandboxRender{}: {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
		},
	}
}

// observedPod is the cache's transform of Pods: the part render.ObservedPod keeps, with only
// this controller's managedFields.
func observedPod(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil // a tombstone: its object was transformed when it was cached
	}
	if _, err := keepOwnManagedFields(pod); err != nil {
		return nil, err
	}
	for i := range pod.ManagedFields {
		pod.ManagedFields[i].FieldsV1 = metadataFields(pod.ManagedFields[i].FieldsV1)
	}
	return render.ObservedPod(pod), nil
}

// metadataFields is the metadata part of a managedFields entry's field set. An existing Pod is
// only ever applied its metadata (its spec is never updated; render scopes every Pod update to
// labels, annotations and owner references), so that is all the applier's compare reads of it;
// the spec's fields were most of what a cached Pod held (and a Pod that must be written is read
// whole from the API server first). A field set that does not parse is kept as it is.
func metadataFields(f *metav1.FieldsV1) *metav1.FieldsV1 {
	if f == nil {
		return nil
	}
	var all map[string]json.RawMessage
	if json.Unmarshal(f.Raw, &all) != nil {
		return f
	}
	md, ok := all["f:metadata"]
	if !ok {
		return &metav1.FieldsV1{Raw: []byte("{}")}
	}
	raw, err := json.Marshal(map[string]json.RawMessage{"f:metadata": md})
	if err != nil {
		return f
	}
	return &metav1.FieldsV1{Raw: raw}
}

func keepOwnManagedFields(in any) (any, error) {
	obj, ok := in.(metav1.Object)
	if !ok {
		return in, nil
	}
	var own []metav1.ManagedFieldsEntry
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldManager {
			own = append(own, e)
		}
	}
	obj.SetManagedFields(own)
	return in, nil
}
