package render

import (
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// Upstream's claim timing annotations (RFC 3339 with nanoseconds), which its metrics and e2e
// suite read.
const (
	ClaimFirstObservedAnnotation = "agents.x-k8s.io/controller-first-observed-at"
	ClaimFirstReadyAnnotation    = "agents.x-k8s.io/claim-first-ready-at"
)

// UpstreamAnnotations is the opt-in to write upstream's annotations into objects users own
// (--upstream-annotations). By default we write none: Git never drifts. Tools and tests written
// against upstream read them, and an SDK falls back to the Sandbox's name without pod-name.
type UpstreamAnnotations struct {
	// Enabled writes pod-name on Sandboxes and sandbox-name on warm claims.
	Enabled bool
	// ClaimTiming also writes the claims' two timing annotations (upstream's default; its
	// --disable-claim-observability-annotations turns them off).
	ClaimTiming bool
}

// sandboxUpstreamAnnotations are the annotations upstream's controller keeps on a Sandbox that are
// missing from it: agents.x-k8s.io/pod-name, the name of its Pod, once the Pod is observed. A
// value already there is never overwritten, as upstream never overwrites it. nil when nothing is
// to be written.
func sandboxUpstreamAnnotations(sb *agentsv1beta1.Sandbox, found SandboxFound, u UpstreamAnnotations) map[string]string {
	if !u.Enabled || sb.Annotations[agentsv1beta1.SandboxPodNameAnnotation] != "" {
		return nil
	}
	for _, p := range found.Pods {
		if p.Name == sb.Name && p.DeletionTimestamp.IsZero() {
			return map[string]string{agentsv1beta1.SandboxPodNameAnnotation: p.Name}
		}
	}
	return nil
}

// claimUpstreamAnnotations are the annotations upstream's controller writes into a claim, with
// the values it writes, that the claim lacks or holds with another value; nil when nothing is
// to be written. sb is the claim's Sandbox (nil before it has one), next the status this pass
// writes, now the time of the pass:
//   - controller-first-observed-at: the first pass's time, kept once written;
//   - agents.x-k8s.io/sandbox-name: the adopted warm Sandbox (upstream's cold path never sets it);
//   - claim-first-ready-at: the time of the first pass that finds the claim Ready, kept once
//     written (upstream often writes "unknown" there from a stale cache; we do not).
//
// The result holds every annotation of the set, so one apply carries them all.
func claimUpstreamAnnotations(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, next *extv1beta1.SandboxClaimStatus, now time.Time, u UpstreamAnnotations) map[string]string {
	if !u.Enabled {
		return nil
	}
	have := claim.Annotations
	want := map[string]string{}
	stamp := func(key string) {
		if v := have[key]; v != "" {
			want[key] = v
			return
		}
		want[key] = now.UTC().Format(time.RFC3339Nano)
	}
	if u.ClaimTiming {
		stamp(ClaimFirstObservedAnnotation)
		if next != nil && meta.IsStatusConditionTrue(next.Conditions, agentsv1beta1.ConditionReady) || have[ClaimFirstReadyAnnotation] != "" {
			stamp(ClaimFirstReadyAnnotation)
		}
	}
	if sb != nil && sb.Labels[agentsv1beta1.SandboxLaunchTypeLabel] == agentsv1beta1.SandboxLaunchTypeWarm {
		want[extv1beta1.AssignedSandboxNameAnnotation] = sb.Name
	} else if v := have[extv1beta1.AssignedSandboxNameAnnotation]; v != "" {
		want[extv1beta1.AssignedSandboxNameAnnotation] = v
	}
	for k, v := range want {
		if have[k] != v {
			return want
		}
	}
	return nil
}

// annotationsStep applies annotations, and only them, to an object users own, in the role of
// ManagerUpstreamAnnotations.
func annotationsStep(gvk schema.GroupVersionKind, namespace, name string, annotations map[string]string) Step {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetAnnotations(annotations)
	return Step{Action: actionUpdate, Kind: gvk.Kind, Name: name, Intent: &Intent{Object: u}, Manager: ManagerUpstreamAnnotations}
}

// overlay is have with applied laid over it: what an object holds as far as a controller that
// applied applied knows, when the object read may not show that apply yet.
func overlay(have, applied map[string]string) map[string]string {
	if len(applied) == 0 {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, applied)
	return out
}
