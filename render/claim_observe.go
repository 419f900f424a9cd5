package render

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// ClaimCreatedWhileRunning reports whether a claim was created after the controller process
// began reconciling at started, which decides how far a claim's pass may trust what the
// process knows: such a claim can have only what this process wrote for it, so a Sandbox it
// created or adopted nothing for does not exist, and no API read is needed to say so; but the
// cache may not show yet a Sandbox that a GitOps tool applied together with the claim (the two
// watch events come on separate streams), so when the cache shows none under the claim's name,
// the pass asks the API server. The API server stores creation times to the second, so started
// is truncated to it: a claim created in the second the process started is not counted, since
// its stored time cannot tell whether it came before.
func ClaimCreatedWhileRunning(claim *extv1beta1.SandboxClaim, started time.Time) bool {
	return claim.CreationTimestamp.Time.After(started.Truncate(time.Second))
}

// PendingWrite is what the controller remembers of a write of its own to an object that the
// cache may not show yet: the resourceVersion the write started from (empty: none), and whose
// write is in flight on it (empty: none).
type PendingWrite struct {
	From   string
	Holder types.UID
}

// Offerable decides whether an object the cache shows at resourceVersion may be offered to the
// pass of holder (a pool member to a claim that would adopt it; a claim to the pass that writes
// its pool's rank), given the write of ours pending on it (nil: none). Not while another
// holder's write is in flight on it: of two adoptions of one member only one can succeed. Not
// while the cache still shows the version our last write started from: the cache has not caught
// up with the write, so the member looks free when it is taken. settled reports that the cache
// shows a later version than our write started from: the write may be forgotten.
func Offerable(w *PendingWrite, resourceVersion string, holder types.UID) (offer, settled bool) {
	switch {
	case w == nil:
		return true, false
	case w.Holder != "" && w.Holder != holder, w.From != "" && w.From == resourceVersion:
		return false, false
	}
	return true, w.From != ""
}

// ClaimControls reports whether sb is the claim's Sandbox: the claim is its controller (by UID,
// so a claim deleted and made again under the same name does not inherit it) and it is not on
// its way out.
func ClaimControls(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) bool {
	return metav1.IsControlledBy(sb, claim) && sb.DeletionTimestamp == nil
}

// ClaimedSandbox is the claim's Sandbox among items (the Sandboxes labeled with the claim's UID),
// nil if none is (ClaimControls).
func ClaimedSandbox(claim *extv1beta1.SandboxClaim, items []agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	for i := range items {
		if ClaimControls(claim, &items[i]) {
			return &items[i]
		}
	}
	return nil
}
