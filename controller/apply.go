package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

// apply sends a step's intent, live being the object as found (nil if none, or of a kind whose
// managedFields the cache does not keep). A step with a precondition is sent as it is, carrying
// it: create-only as a resourceVersion no object has (the API server creates the object if it
// is absent and refuses with a conflict if it exists, so someone else's object of that name is
// never taken over by a forced apply), or the resourceVersion it was planned on. Otherwise the
// intent is compared with what FieldManager already owns in live and sent only if it differs.
func (a applier) apply(ctx context.Context, s render.Step, live client.Object) (Outcome, error) {
	intent := s.Intent
	want, err := intentMap(intent.Object)
	if err != nil {
		return "", err
	}
	manager := FieldManager
	if s.Manager == render.ManagerUpstreamAnnotations {
		manager = AnnotationsFieldManager
	}
	if pre := s.Precondition; pre != nil && (pre.CreateOnly || pre.ResourceVersion != "") {
		return a.applyOn(ctx, s, want, manager)
	}
	if live == nil || !extractable(live) {
		if err := a.send(ctx, want, manager); err != nil {
			if s.Manager == render.ManagerUpstreamAnnotations && apierrors.IsNotFound(err) {
				return Unchanged, nil // gone meanwhile: nothing to annotate
			}
			return "", err
		}
		return Configured, nil
	}
	owned, err := ownedFields(live)
	if err != nil {
		return "", err
	}
	config, err := applyConfig(want, owned, intent.Scope)
	if err != nil {
		return "", err
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
	err = a.send(ctx, config, FieldManager)
	if apierrors.IsInvalid(err) && len(intent.Scope) == 0 {
		// Forcing takes over the fields another manager changed, but list items another manager
		// added stay (a Service port renumbered by hand keeps its name, and the merge has two
		// ports of one name). A child kept exactly as rendered then gets its spec replaced
		// wholesale, as upstream's drift fix does, and the apply is sent again.
		if _, perr := a.replaceSpec(ctx, live, want, nil); perr != nil {
			return "", fmt.Errorf("%w; replacing its spec: %v", err, perr)
		}
		if err = a.send(ctx, config, FieldManager); err == nil {
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

// applyOn sends want on the step's precondition: create-only, or on a resourceVersion. A failed
// precondition (the object exists; it changed or is gone) is a conflictError.
func (a applier) applyOn(ctx context.Context, s render.Step, want map[string]any, manager string) (Outcome, error) {
	rv, outcome := s.Precondition.ResourceVersion, Configured
	if s.Precondition.CreateOnly {
		rv, outcome = createOnly, Created
	}
	if err := unstructured.SetNestedField(want, rv, "metadata", "resourceVersion"); err != nil {
		return "", err
	}
	err := a.send(ctx, want, manager)
	if apierrors.IsConflict(err) || (!s.Precondition.CreateOnly && apierrors.IsNotFound(err)) {
		return "", &conflictError{step: s}
	}
	if err != nil {
		return "", err
	}
	return outcome, nil
}

// conflictError is a step whose precondition failed: the object exists (create-only), changed
// or is gone (a resourceVersion), or another worker's write to it is in flight.
type conflictError struct {
	step     render.Step
	inFlight bool
}

func (e *conflictError) Error() string {
	if e.inFlight {
		return fmt.Sprintf("%s: another write to it is in flight", e.step)
	}
	return fmt.Sprintf("%s: the object is not as the pass found it", e.step)
}

// send sends config as a forced apply of manager: through applies when set (see
// applyTransport), else through the client.
func (a applier) send(ctx context.Context, config map[string]any, manager string) error {
	u := &unstructured.Unstructured{Object: config}
	var err error
	if a.applies != nil {
		err = a.applies.apply(ctx, config, manager)
	} else {
		err = a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership)
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

// delete deletes the object of a delete step in namespace, on the step's precondition (its UID,
// and its resourceVersion when the plan gives one) and propagation. An object already gone (a
// cache that has not seen its deletion yet) is Unchanged: nothing happened, so no event says
// so. A failed precondition is a conflictError.
func (a applier) delete(ctx context.Context, namespace string, s render.Step) (Outcome, error) {
	obj := newObject(s.Kind)
	if obj == nil {
		return "", fmt.Errorf("step %s: not a kind this controller deletes", s)
	}
	obj.SetNamespace(namespace)
	obj.SetName(s.Name)
	var opts []client.DeleteOption
	if pre := s.Precondition; pre != nil && (pre.UID != "" || pre.ResourceVersion != "") {
		p := client.Preconditions{}
		if pre.UID != "" {
			p.UID = &pre.UID
		}
		if pre.ResourceVersion != "" {
			p.ResourceVersion = &pre.ResourceVersion
		}
		opts = append(opts, p)
	}
	if s.Propagation != nil {
		opts = append(opts, client.PropagationPolicy(*s.Propagation))
	}
	switch err := a.client.Delete(ctx, obj, opts...); {
	case apierrors.IsNotFound(err):
		return Unchanged, nil
	case apierrors.IsConflict(err):
		return "", &conflictError{step: s}
	case err != nil:
		return "", fmt.Errorf("deleting %s %q: %w", s.Kind, s.Name, err)
	}
	return Deleted, nil
}

// ownedFields is what FieldManager applied to obj, as it is now, read from managedFields.
func ownedFields(obj client.Object) (map[string]any, error) {
	k := kindOfObject(obj)
	if k == nil || k.extract == nil {
		return nil, fmt.Errorf("no field extraction for %T", obj)
	}
	extracted, err := k.extract(obj, FieldManager)
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

// intentMap is an intent as an apply sends it: toMap, and none of the metadata the API server
// sets (an intent made from an object read, as an adoption is, carries them).
func intentMap(obj render.Object) (map[string]any, error) {
	m, err := toMap(obj)
	if err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"uid", "resourceVersion", "generation", "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"} {
			delete(md, k)
		}
	}
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
