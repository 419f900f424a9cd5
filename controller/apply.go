package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// FieldManager is the one field manager every write of this controller uses. Kubernetes' advice
// for controllers: a stable name per role, conflicts forced on the fields it owns.
const FieldManager = "sandbox-gitops"

// Outcome is what applying one intent did.
type Outcome string

const (
	// Created: the object did not exist and was created.
	Created Outcome = "Created"
	// Configured: the object existed and the intent changed what the field manager owns.
	Configured Outcome = "Configured"
	// Unchanged: the intent equals what the field manager already owns; nothing was sent.
	Unchanged Outcome = "Unchanged"
	// Deleted: the object was deleted.
	Deleted Outcome = "Deleted"
)

// applier sends intents with server-side apply. It compares each intent with what FieldManager
// already owns in the live object (client-go's Extract functions read that from managedFields)
// instead of sending a dry run, so an unchanged intent costs no request at all.
type applier struct {
	client client.Client
	// applies sends the applies when set (see applyTransport); else client does.
	applies *applyTransport
	// reader reads from the API server: a scoped intent that has to be sent is built on the
	// object as the API server has it, not as cached.
	reader client.Reader
}

// apply applies intent to the object, live being the object as observed (nil if absent).
func (a applier) apply(ctx context.Context, intent *render.Intent, live client.Object) (Outcome, error) {
	want, err := toMap(intent.Object)
	if err != nil {
		return "", err
	}
	owned := map[string]any{}
	if live != nil {
		if owned, err = ownedFields(live); err != nil {
			return "", err
		}
	}
	config, err := applyConfig(want, owned, intent.Scope)
	if err != nil {
		return "", err
	}
	if live == nil {
		// A create must not land on an object the cache does not show: someone else's object of
		// that name (the cache holds only labelled children) would be taken over by a forced
		// apply. As a precondition that no object meets, the resourceVersion makes the API
		// server create the object if it is absent and refuse with a conflict if it exists.
		if err := unstructured.SetNestedField(config, createOnly, "metadata", "resourceVersion"); err != nil {
			return "", err
		}
		if err := a.send(ctx, config); err != nil {
			if apierrors.IsConflict(err) {
				kind, _ := want["kind"].(string)
				return "", &existsError{kind: kind, name: intent.Object.GetName()}
			}
			return "", err
		}
		return Created, nil
	}
	if reflect.DeepEqual(normalize(config), normalize(owned)) {
		if intent.Drifted && len(intent.Scope) == 0 {
			// This manager owns the intent as it is, yet the child differs from it: the
			// difference is another manager's, which no apply of ours removes.
			return a.takeBack(ctx, live, want)
		}
		return Unchanged, nil
	}
	if len(intent.Scope) > 0 {
		// A scoped intent sends again every field the manager owns outside its scope, so those
		// must be the API server's: the cache keeps only part of some objects (a Pod's spec is
		// not cached, see render.ObservedPod) and may lag behind. The compare above decided on
		// the scoped fields alone, which the cache has.
		fresh := live.DeepCopyObject().(client.Object)
		if err := a.reader.Get(ctx, client.ObjectKeyFromObject(live), fresh); err != nil {
			return "", fmt.Errorf("reading %T %q before applying: %w", live, live.GetName(), err)
		}
		live = fresh
		if owned, err = ownedFields(live); err != nil {
			return "", err
		}
		if config, err = applyConfig(want, owned, intent.Scope); err != nil {
			return "", err
		}
		if reflect.DeepEqual(normalize(config), normalize(owned)) {
			return Unchanged, nil
		}
	}
	err = a.send(ctx, config)
	if apierrors.IsInvalid(err) && len(intent.Scope) == 0 {
		// Forcing takes over the fields another manager changed, but list items another manager
		// added stay (a Service port renumbered by hand keeps its name, and the merge has two
		// ports of one name). A child kept exactly as rendered then gets its spec replaced
		// wholesale, as upstream's drift fix does, and the apply is sent again.
		if _, perr := a.replaceSpec(ctx, live, want, nil); perr != nil {
			return "", fmt.Errorf("%w; replacing its spec: %v", err, perr)
		}
		if err = a.send(ctx, config); err == nil {
			err = a.dropUpdateEntry(ctx, live)
		}
	}
	if err != nil {
		return "", err
	}
	return Configured, nil
}

// dropUpdateEntry removes the managedFields entry replaceSpec leaves under this manager's name
// with operation Update. Server-side apply counts it as another owner of every field the patch
// set, so a field the render stops wanting (a port, say) would never be removed by the apply.
// The list is replaced whole, which the API server takes as it is (the documented way to clear
// a manager), on the version just read: a write in between makes it a conflict, retried.
func (a applier) dropUpdateEntry(ctx context.Context, live client.Object) error {
	reader := a.reader
	if reader == nil {
		reader = a.client
	}
	fresh := live.DeepCopyObject().(client.Object)
	if err := reader.Get(ctx, client.ObjectKeyFromObject(live), fresh); err != nil {
		return fmt.Errorf("reading %T %q after replacing its spec: %w", live, live.GetName(), err)
	}
	entries := fresh.GetManagedFields()
	kept := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		if e.Manager != FieldManager || e.Operation != metav1.ManagedFieldsOperationUpdate {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(entries) {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": fresh.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": kept},
	})
	if err != nil {
		return err
	}
	if err := a.client.Patch(ctx, fresh, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("dropping the %s Update entry of %T %q: %w", FieldManager, live, live.GetName(), err)
	}
	return nil
}

// createOnly is the resourceVersion a create is sent with: an etcd revision counts up from 1 and
// never reaches it, so no object has it.
const createOnly = "9223372036854775807"

// existsError is a create refused because an object of that name exists.
type existsError struct{ kind, name string }

func (e *existsError) Error() string {
	return fmt.Sprintf("%s %q exists but was not observed", e.kind, e.name)
}

// applyConfig is what is sent for an intent: the whole desired object, or for a scoped intent
// everything the manager owns with the scoped fields replaced, or server-side apply would
// remove the fields left out.
func applyConfig(want, owned map[string]any, scope []string) (map[string]any, error) {
	if len(scope) == 0 {
		return want, nil
	}
	config := runtime.DeepCopyJSON(owned)
	for _, p := range scope {
		path := strings.Split(p, ".")
		if v, ok, _ := unstructured.NestedFieldNoCopy(want, path...); ok {
			if err := unstructured.SetNestedField(config, v, path...); err != nil {
				return nil, err
			}
		} else {
			unstructured.RemoveNestedField(config, path...)
		}
	}
	for _, k := range []string{"apiVersion", "kind"} {
		config[k] = want[k]
	}
	for _, k := range []string{"name", "namespace"} {
		if err := unstructured.SetNestedField(config, want["metadata"].(map[string]any)[k], "metadata", k); err != nil {
			return nil, err
		}
	}
	return config, nil
}

func (a applier) send(ctx context.Context, config map[string]any) error {
	u := &unstructured.Unstructured{Object: config}
	var err error
	if a.applies != nil {
		err = a.applies.apply(ctx, config)
	} else {
		err = a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
	}
	if err != nil {
		return fmt.Errorf("applying %s %q: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// takeBack replaces the spec of a child kept exactly as rendered whose difference from the
// intent another manager owns: the fields of want's spec are set and the top-level spec fields
// only other managers hold (read from the API server: the cache keeps only this manager's
// managedFields) are removed, on the version read. The ownership entry the patch leaves under
// this manager's name is dropped again, so the apply stays the only owner of what it sets.
func (a applier) takeBack(ctx context.Context, live client.Object, want map[string]any) (Outcome, error) {
	fresh := live.DeepCopyObject().(client.Object)
	if err := a.reader.Get(ctx, client.ObjectKeyFromObject(live), fresh); err != nil {
		return "", fmt.Errorf("reading %T %q before taking its spec back: %w", live, live.GetName(), err)
	}
	changed, err := a.replaceSpec(ctx, fresh, want, othersSpecFields(fresh))
	if err != nil {
		return "", fmt.Errorf("taking back the spec of %T %q: %w", live, live.GetName(), err)
	}
	if !changed {
		// What differs is nothing a patch changes (the API server left the object as it was):
		// reporting a write would only requeue the pass to send the same patch again.
		return Unchanged, nil
	}
	if err := a.dropUpdateEntry(ctx, fresh); err != nil {
		return "", err
	}
	return Configured, nil
}

// othersSpecFields are the top-level spec fields that managers other than FieldManager own in
// obj (defaults the API server filled in are owned by nobody, so they are not among them).
func othersSpecFields(obj client.Object) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldManager || e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			continue
		}
		for k := range fields.Spec {
			if name, ok := strings.CutPrefix(k, "f:"); ok && !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// replaceSpec sets every field of want's spec on the live object with a JSON merge patch, which
// replaces lists whole, and removes the listed top-level spec fields want does not set. With
// remove it carries live's resourceVersion, so it applies only to the object read. It reports
// whether the object changed (the API server gives a patch that changes nothing no new
// resourceVersion).
func (a applier) replaceSpec(ctx context.Context, live client.Object, want map[string]any, remove []string) (bool, error) {
	spec, ok := want["spec"].(map[string]any)
	if !ok {
		return false, fmt.Errorf("no spec to replace")
	}
	body := map[string]any{}
	for k, v := range spec {
		body[k] = v
	}
	for _, k := range remove {
		if _, set := body[k]; !set {
			body[k] = nil
		}
	}
	patch := map[string]any{"spec": body}
	if len(remove) > 0 {
		patch["metadata"] = map[string]any{"resourceVersion": live.GetResourceVersion()}
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return false, err
	}
	// live may be the cache's own object: the response goes into a copy.
	patched := live.DeepCopyObject().(client.Object)
	if err := a.client.Patch(ctx, patched, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(FieldManager)); err != nil {
		return false, err
	}
	return patched.GetResourceVersion() != live.GetResourceVersion(), nil
}

// delete deletes obj if it is still the object observed (same UID). An object already gone (a
// cache that has not seen its deletion yet) is Unchanged: nothing happened, so no event says so.
func (a applier) delete(ctx context.Context, obj client.Object) (Outcome, error) {
	uid := obj.GetUID()
	// obj may be the cache's own object: the client is given a copy.
	err := a.client.Delete(ctx, obj.DeepCopyObject().(client.Object), client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err):
		return Unchanged, nil
	case err != nil:
		return "", fmt.Errorf("deleting %T %q: %w", obj, obj.GetName(), err)
	}
	return Deleted, nil
}

// ownedFields is what FieldManager applied to obj, as it is now, read from managedFields.
func ownedFields(obj client.Object) (map[string]any, error) {
	var extracted any
	var err error
	switch o := obj.(type) {
	case *corev1.Pod:
		extracted, err = corev1ac.ExtractPod(o, FieldManager)
	case *corev1.Service:
		extracted, err = corev1ac.ExtractService(o, FieldManager)
	case *corev1.PersistentVolumeClaim:
		extracted, err = corev1ac.ExtractPersistentVolumeClaim(o, FieldManager)
	case *networkingv1.NetworkPolicy:
		extracted, err = networkingv1ac.ExtractNetworkPolicy(o, FieldManager)
	default:
		return nil, fmt.Errorf("no field extraction for %T", obj)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the fields %s owns in %q: %w", FieldManager, obj.GetName(), err)
	}
	return toMap(extracted)
}

// toMap is v as JSON, with what an apply never sends removed (status, creationTimestamp).
func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	return m, nil
}

// normalize drops empty maps, empty lists and nulls, which server-side apply records no
// differently from absent fields, so that comparing an intent with the extracted fields does
// not see a change where the API server would see none.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if n := normalize(e); n != nil {
				out[k] = n
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(t) == 0 {
			return nil
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}
