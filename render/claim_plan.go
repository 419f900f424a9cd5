package render

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// claimDependencyRecheck is the safety net of a claim waiting on a pool or template that does
// not exist: their creation wakes the claim through a watch well before it.
const claimDependencyRecheck = time.Minute

// ClaimFound is what a controller found in the cluster for one claim's pass.
type ClaimFound struct {
	// Sandbox is the Sandbox the claim controls, nil if none.
	Sandbox *agentsv1beta1.Sandbox
	// Pool is the claim's pool and template as ResolveClaim found them.
	Pool ClaimPool
	// Members are the Sandboxes carrying the pool's warm-pool label that the claim may be
	// offered: a member the cache shows as it was before an adoption of this controller, or that
	// another claim's adoption is in flight on, is left out.
	Members []*agentsv1beta1.Sandbox
	// Claims are the claims of the pool, for the claim's rank among those waiting (claimRank).
	Claims []*extv1beta1.SandboxClaim
	// Arrival is the order the controller's informer first listed each member under the pool
	// (member name → a sequence number, smaller first): upstream's candidate queue is fed by the
	// same events in the same order. Nil where no informer ran; members then rank by name.
	Arrival map[string]uint64
	// Named is the Sandbox found under claimSandboxName when the controller read it
	// (ClaimNameToRead, or a create of that name refused), nil if none.
	Named *agentsv1beta1.Sandbox
	// NoConfig says no render config is in force in the claim's namespace: only the claim's
	// lifecycle runs, and nothing is rendered.
	NoConfig bool
	// Annotations are upstream's annotations this controller applied to the claim that the claim
	// as read may not show yet.
	Annotations map[string]string
}

// Saw records what the API server holds under a step's name after the step met a conflict
// (nil: nothing there, or nothing the claim may take now): the member a lost adoption tried,
// changed or gone, or the object in the way of a create.
func (f *ClaimFound) Saw(step Step, obj Object) {
	sb, _ := obj.(*agentsv1beta1.Sandbox)
	if step.Action != ActionAdopt {
		f.Named = sb
		return
	}
	members := f.Members[:0:0]
	for _, m := range f.Members {
		switch {
		case m.Name != step.Name:
			members = append(members, m)
		case sb != nil:
			members = append(members, sb)
		}
	}
	f.Members = members
}

// ClaimPlan is one pass over a claim (see Plan), with the claim's expiry decision and the
// Sandbox the claim has once the steps are written.
type ClaimPlan struct {
	Plan[extv1beta1.SandboxClaimStatus] `json:",inline"`
	Expiry                              ExpiryDecision `json:"expiry"`
	// Sandbox is the claim's Sandbox after the steps, nil if none.
	Sandbox *agentsv1beta1.Sandbox `json:"-"`
	// LaunchType is how the claim's Sandbox was launched (warm or cold), empty if it has none.
	LaunchType string `json:"launchType,omitempty"`
}

// claimSandboxName is the name of the claim's own Sandbox: the one its status names, else the
// claim's, which a cold Sandbox takes.
func claimSandboxName(claim *extv1beta1.SandboxClaim) string {
	if n := claim.Status.SandboxStatus.Name; n != "" {
		return n
	}
	return claim.Name
}

// ClaimNameToRead is the Sandbox a pass must read by name before PlanClaim, when the claim
// controls none: a claim about to get a Sandbox, which takes over its own render applied by a
// GitOps tool rather than adopt a warm member beside it (see acquire), and an expired Retain
// claim, whose cleanup must tell "already gone" from "another object holds the name". False when
// nothing is to be read.
func ClaimNameToRead(claim *extv1beta1.SandboxClaim, found ClaimFound, now time.Time) (string, bool) {
	if found.Sandbox != nil {
		return "", false
	}
	switch exp := ClaimExpiry(claim, now); {
	case exp.Step == NotExpired, exp.Step == cleanUp && exp.DeleteSandbox:
		return claimSandboxName(claim), true
	}
	return "", false
}

// PlanClaim decides one pass over a claim as upstream's claim controller does: expiry first
// (mark, then carry out the shutdown policy), else keep the Sandbox it has in sync with its
// template's metadata, else adopt a Ready (or networked) member of its pool, wait a moment for
// one about to get its pod IP, or create a cold Sandbox of the claim's name (taking over only
// an earlier GitOps render of it); then the status, written on the claim's resourceVersion as
// upstream writes it and held while a Sandbox starts normally, and upstream's annotations after
// it when asked for.
func PlanClaim(claim *extv1beta1.SandboxClaim, found ClaimFound, now time.Time, opts Options) *ClaimPlan {
	plan := &ClaimPlan{Expiry: ClaimExpiry(claim, now), Sandbox: found.Sandbox}
	plan.requeue(plan.Expiry.RequeueAfter.Duration)
	switch plan.Expiry.Step {
	case MarkExpired:
		plan.status(claim, ClaimStatusInputs{Sandbox: found.Sandbox, Expired: true}, now)
		return plan
	case cleanUp:
		plan.cleanUp(claim, found, now)
		return plan
	}
	if found.NoConfig {
		return plan
	}
	var cerr *ClaimError
	if found.Sandbox != nil {
		cerr = plan.resync(claim, found)
	} else {
		var wait time.Duration
		if cerr, wait = plan.acquire(claim, found, now, opts); wait > 0 {
			// A member is about to get its pod IP: look again shortly, write nothing yet.
			plan.RequeueAfter.Duration = wait
			return plan
		}
	}
	if cerr != nil && cerr.Retried() {
		plan.requeue(claimDependencyRecheck)
	}
	if plan.LaunchType == "" && plan.Sandbox != nil {
		plan.LaunchType = plan.Sandbox.Labels[agentsv1beta1.SandboxLaunchTypeLabel]
	}
	plan.status(claim, ClaimStatusInputs{Sandbox: plan.Sandbox, Err: cerr, ReadyDeadline: opts.claimReadyDeadline()}, now)
	if hold := claimStatusHold(claim, plan.Status, now); hold > 0 && plan.WriteStatus {
		plan.WriteStatus, plan.StatusEvents = false, nil
		plan.requeue(hold)
	}
	plan.requeueAtReadyDeadline(claim, cerr, now, opts)
	plan.upstreamAnnotations(claim, found, now, opts)
	return plan
}

// requeueAtReadyDeadline brings the pass back when a claim whose Sandbox is not Ready reaches its
// ready deadline (claimReadyDeadlineAt), so that its status says so then, not at the next event.
func (p *ClaimPlan) requeueAtReadyDeadline(claim *extv1beta1.SandboxClaim, cerr *ClaimError, now time.Time, opts Options) {
	if cerr != nil || p.Sandbox == nil {
		return
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, agentsv1beta1.ConditionReady); c == nil || !startingReason(*c) {
		return
	}
	if at, ok := claimReadyDeadlineAt(claim, p.Sandbox, opts.claimReadyDeadline()); ok && now.Before(at) {
		p.requeue(at.Sub(now))
	}
}

// resync keeps a claimed Sandbox's metadata as claimSandboxMetadata computes it from the
// current template (template metadata edits reach claimed Sandboxes; spec edits never do), on
// the version found: a concurrent change wins, and its watch event brings the next pass.
func (p *ClaimPlan) resync(claim *extv1beta1.SandboxClaim, found ClaimFound) *ClaimError {
	sb := found.Sandbox
	want, cerr := claimSandboxMetadata(sb, claim, found.Pool.Template)
	if cerr != nil {
		return cerr
	}
	if equality.Semantic.DeepEqual(want.Labels, sb.Labels) && equality.Semantic.DeepEqual(want.Spec.PodTemplate.ObjectMeta, sb.Spec.PodTemplate.ObjectMeta) {
		return nil
	}
	p.Steps = append(p.Steps, Step{Action: actionUpdate, Kind: agentsv1beta1.SandboxKind, Name: sb.Name, Intent: &Intent{Object: want},
		Precondition: &Precondition{ResourceVersion: sb.ResourceVersion}})
	p.Sandbox = want
	return nil
}

// acquire gives a claim without a Sandbox its Sandbox: the first of its pool's adoptable members
// (claimWarmCandidates ranks them) when the claim may have a warm one, else a cold one. The
// adoption is applied on the member's resourceVersion, the lock against two claims taking one
// member; a lost race plans again with the member as the API server then has it. A positive
// wait means a member is about to become adoptable.
func (p *ClaimPlan) acquire(claim *extv1beta1.SandboxClaim, found ClaimFound, now time.Time, opts Options) (*ClaimError, time.Duration) {
	cp := found.Pool
	cold, cerr := ClaimSandbox(claim, cp, opts)
	// The claim's own Sandbox as the render previews it, applied by a GitOps tool with the claim,
	// is what the claim gets: taken over below, never a warm member adopted beside it, which
	// would leave two running Pods where the preview shows one.
	if !claimOwnsRender(claim, found.Named) && claimTriesWarm(claim, cp, cerr) {
		cands := claimWarmCandidates(claim, cp, found.Members, claimRank(claim, found.Claims), found.Arrival, opts)
		if len(cands.Adoptable) > 0 {
			member := cands.Adoptable[0]
			adopted, aerr := AdoptWarmSandbox(member, claim, cp.Template)
			if aerr != nil {
				return aerr, 0
			}
			e := normalEvent("SandboxAdopted", fmt.Sprintf("Adopted warm pool Sandbox %q", adopted.Name))
			p.Steps = append(p.Steps, Step{Action: ActionAdopt, Kind: agentsv1beta1.SandboxKind, Name: adopted.Name, Intent: &Intent{Object: adopted},
				Precondition: &Precondition{ResourceVersion: member.ResourceVersion}, OnConflict: ConflictReplan, Event: &e})
			p.Sandbox, p.LaunchType = adopted, agentsv1beta1.SandboxLaunchTypeWarm
			return nil, 0
		}
		if wait := claimWarmWait(claim, cands, now); wait > 0 {
			return nil, wait
		}
	}
	if cerr != nil {
		return cerr, 0
	}
	// The create goes first, create-only: the common case sends nothing else, and only a refused
	// create reads what holds the name (Named), which a claim may take over only when it is an
	// earlier GitOps render of it.
	e := normalEvent("SandboxProvisioned", fmt.Sprintf("Created Sandbox %q", cold.Name))
	s := createStep(agentsv1beta1.SandboxKind, cold, &e)
	if held := found.Named; held != nil && held.Name == cold.Name {
		if !claimCanTakeOver(held) {
			return claimNotControlledError(claim), 0
		}
		s.Action, s.Precondition = actionUpdate, &Precondition{ResourceVersion: held.ResourceVersion}
	}
	p.Steps = append(p.Steps, s)
	p.Sandbox, p.LaunchType = cold, agentsv1beta1.SandboxLaunchTypeCold
	return nil, 0
}

// cleanUp carries out an expired claim's shutdown policy: delete the claim (its Sandbox goes
// with it through the owner reference), or under Retain delete the Sandbox it controls and keep
// the claim, marked expired; a Sandbox of its name that it does not control is left alone and
// reported.
func (p *ClaimPlan) cleanUp(claim *extv1beta1.SandboxClaim, found ClaimFound, now time.Time) {
	if policy := p.Expiry.DeleteClaim; policy != "" {
		s := deleteStep(extv1beta1.SandboxClaimKind, claim, nil)
		s.Propagation = propagation(policy)
		p.Steps = append(p.Steps, s)
		return
	}
	in := ClaimStatusInputs{Expired: true}
	switch sb := found.Sandbox; {
	case sb != nil:
		p.Steps = append(p.Steps, deleteStep(agentsv1beta1.SandboxKind, sb, nil))
	case found.Named != nil:
		in.Err = claimNotOwnedError(found.Named.Name, claim.Name)
	}
	p.Sandbox = nil
	p.status(claim, in, now)
}

// status sets the claim's status from in, whether it is written (on the claim's
// resourceVersion, as upstream's optimistic lock), and the events of writing it.
func (p *ClaimPlan) status(claim *extv1beta1.SandboxClaim, in ClaimStatusInputs, now time.Time) {
	st := ClaimStatus(claim, in, metav1.NewTime(now))
	p.Status = &st
	p.WriteStatus = claimStatusChanged(&claim.Status, &st)
	p.StatusPrecondition = &Precondition{ResourceVersion: claim.ResourceVersion}
	if p.WriteStatus {
		p.StatusEvents = claimStatusEvents(&claim.Status, &st)
	}
}

// upstreamAnnotations applies upstream's annotations to the claim, when asked for. Usually after
// its status, off the way to it; but never after the status write that turns the claim Ready:
// upstream's clients (its e2e suite, its SDKs) read the annotations the moment they see Ready,
// so they go first, and that status waits for the next pass, which the annotations' own watch
// event brings (its lock is the claim's resourceVersion, which their write moves). That costs a
// warm claim one pass and one watch round trip, only with the switch on.
func (p *ClaimPlan) upstreamAnnotations(claim *extv1beta1.SandboxClaim, found ClaimFound, now time.Time, opts Options) {
	seen := *claim // the claim as far as this controller knows, with the annotations it applied
	seen.Annotations = overlay(claim.Annotations, found.Annotations)
	ann := claimUpstreamAnnotations(&seen, p.Sandbox, p.Status, now, opts.Upstream)
	if ann == nil {
		return
	}
	step := annotationsStep(extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxClaimKind), claim.Namespace, claim.Name, ann)
	if p.WriteStatus && meta.IsStatusConditionTrue(p.Status.Conditions, agentsv1beta1.ConditionReady) &&
		!meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady) {
		p.Steps = append(p.Steps, step)
		p.WriteStatus, p.StatusEvents = false, nil
		p.requeue(annotationsBeforeReadyRecheck)
		return
	}
	p.After = append(p.After, step)
}

// annotationsBeforeReadyRecheck is when a claim whose Ready status waits behind upstream's
// annotations is looked at again should their watch event not come.
const annotationsBeforeReadyRecheck = time.Second

// claimStatusEvents are the events of a claim's status write, as upstream records them: its
// ClaimExpired event the first time the status says so, and a Warning for an error when its
// message first appears (not for a Sandbox still starting).
func claimStatusEvents(cur, next *extv1beta1.SandboxClaimStatus) []Event {
	c := meta.FindStatusCondition(next.Conditions, agentsv1beta1.ConditionReady)
	if c == nil || c.Status == metav1.ConditionTrue {
		return nil
	}
	old := meta.FindStatusCondition(cur.Conditions, agentsv1beta1.ConditionReady)
	var out []Event
	if c.Reason == extv1beta1.ClaimExpiredReason && (old == nil || old.Reason != c.Reason) {
		out = append(out, normalEvent(extv1beta1.ClaimExpiredReason, ClaimExpiredMessage))
	}
	if c.Reason != reasonSandboxNotReady && c.Reason != extv1beta1.ClaimExpiredReason && (old == nil || old.Message != c.Message) {
		out = append(out, warningEvent(c.Reason, c.Message))
	}
	return out
}
