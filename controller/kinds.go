package controller

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
)

// kind is one row of the table of kinds the controller plans, reads or writes. The executor
// names objects by it (kindOf), a Sandbox's pass files its children by it, and the applier makes
// and compares objects with it, so a kind added here is known to all three at once, where three
// type switches once had to agree.
type kind struct {
	// name is the kind as a plan's steps and the expectations' keys spell it.
	name string
	// object is an empty object of the kind: its Go type identifies the kind of an object read.
	object client.Object
	// written: a step may create, read back or delete an object of the kind, so the executor and
	// the applier make empty ones (newObject). Templates and pools are only planned, never the
	// object of a step.
	written bool
	// extract reads what a field manager applied to an object of the kind from its managedFields
	// (client-go's Extract functions). Only the children have one: the cache keeps their
	// managedFields, so an intent is compared with what was applied and an unchanged one is not
	// sent. nil: every apply of the kind is sent.
	extract func(obj client.Object, manager string) (any, error)
}

// kinds is the table: the agent-sandbox kinds the reconcilers plan, the SandboxRender whose
// status one writes, then the children a Sandbox's or a template's plan writes.
var kinds = []kind{
	{name: agentsv1beta1.SandboxKind, object: &agentsv1beta1.Sandbox{}, written: true},
	{name: extv1beta1.SandboxClaimKind, object: &extv1beta1.SandboxClaim{}, written: true},
	{name: extv1beta1.SandboxWarmPoolKind, object: &extv1beta1.SandboxWarmPool{}},
	{name: extv1beta1.SandboxTemplateKind, object: &extv1beta1.SandboxTemplate{}},
	{name: renderv1alpha1.SandboxRenderKind, object: &renderv1alpha1.SandboxRender{}},
	{name: "Pod", object: &corev1.Pod{}, written: true, extract: func(obj client.Object, m string) (any, error) {
		return corev1ac.ExtractPod(obj.(*corev1.Pod), m)
	}},
	{name: "Service", object: &corev1.Service{}, written: true, extract: func(obj client.Object, m string) (any, error) {
		return corev1ac.ExtractService(obj.(*corev1.Service), m)
	}},
	{name: "PersistentVolumeClaim", object: &corev1.PersistentVolumeClaim{}, written: true, extract: func(obj client.Object, m string) (any, error) {
		return corev1ac.ExtractPersistentVolumeClaim(obj.(*corev1.PersistentVolumeClaim), m)
	}},
	{name: "NetworkPolicy", object: &networkingv1.NetworkPolicy{}, written: true, extract: func(obj client.Object, m string) (any, error) {
		return networkingv1ac.ExtractNetworkPolicy(obj.(*networkingv1.NetworkPolicy), m)
	}},
}

// kindsByType and kindsByName index the table, built once.
var kindsByType, kindsByName = func() (map[reflect.Type]*kind, map[string]*kind) {
	byType, byName := make(map[reflect.Type]*kind, len(kinds)), make(map[string]*kind, len(kinds))
	for i := range kinds {
		byType[reflect.TypeOf(kinds[i].object)] = &kinds[i]
		byName[kinds[i].name] = &kinds[i]
	}
	return byType, byName
}()

// kindOfObject is obj's row of the table, or nil.
func kindOfObject(obj client.Object) *kind {
	return kindsByType[reflect.TypeOf(obj)]
}

// kindOf is the kind of an object the reconcilers plan or write: its name in the table, or its
// Go type for an object the table does not hold (only ever in a message).
func kindOf(obj client.Object) string {
	if k := kindOfObject(obj); k != nil {
		return k.name
	}
	return fmt.Sprintf("%T", obj)
}

// newObject is an empty object of a kind a step writes, or nil for a kind no step writes.
func newObject(name string) client.Object {
	if k := kindsByName[name]; k != nil && k.written {
		return k.object.DeepCopyObject().(client.Object)
	}
	return nil
}

// extractable reports whether ownedFields can read what FieldManager owns in obj: the children,
// whose managedFields entries of this manager the cache keeps.
func extractable(obj client.Object) bool {
	k := kindOfObject(obj)
	return k != nil && k.extract != nil
}
