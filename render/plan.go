package render

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// Plan is one controller pass over one object, decided here so that the controller only
// executes it. The four kinds share it (PlanSandbox, PlanTemplate, PlanPool, PlanClaim, each
// embedding it in a plan of its own kind), and one executor serves them all:
//
//  1. Steps are sent in order. A step whose precondition fails is handled as its OnConflict
//     says; any other failure ends the pass.
//  2. The status is written when WriteStatus says so, on StatusPrecondition, unless a step wrote
//     and SettleAfterWrites is set.
//  3. After are sent: writes nobody waits for, kept off the way to the status.
//  4. The events are recorded: those of the steps that wrote (WrittenEvent), Events, and
//     StatusEvents when the status write was sent.
//  5. The pass comes back after RequeueAfter, or ends in Error, retried with backoff.
//
// S is the kind's status type; a kind without a status uses NoStatus.
type Plan[S any] struct {
	// Steps are the writes, in order.
	Steps []Step `json:"steps,omitempty"`
	// Status is the object's status after the steps (nil when the pass has none, as when the
	// object itself is deleted).
	Status *S `json:"status,omitempty"`
	// WriteStatus says Status differs from the object's and is written in this pass, not held.
	WriteStatus bool `json:"writeStatus,omitempty"`
	// StatusPrecondition is what the status write carries: a resourceVersion makes it refused
	// when the object changed since it was read (the write is then dropped, and the change's
	// watch event brings the next pass). Nil writes it unconditionally.
	StatusPrecondition *Precondition `json:"statusPrecondition,omitempty"`
	// SettleAfterWrites, when set, holds the status of a pass in which a step wrote: the watch
	// events of those writes bring the next pass, which computes the status from the objects as
	// the API server then has them (one status write instead of two). The pass then comes back
	// within SettleAfterWrites, the safety net should no event come.
	SettleAfterWrites metav1.Duration `json:"settleAfterWrites,omitzero"`
	// After are writes sent once the status is (or would have been) written: nobody waits for
	// them, so they do not delay it.
	After []Step `json:"after,omitempty"`
	// RequeueAfter is when to look again, zero when only a watch event should bring the next
	// pass.
	RequeueAfter metav1.Duration `json:"requeueAfter,omitzero"`
	// Events are recorded on the object after the steps, whatever they did.
	Events []Event `json:"events,omitempty"`
	// StatusEvents are recorded only when the status write is sent: a write the cache has not
	// caught up with, or one refused on its precondition, is not sent, and neither are they.
	StatusEvents []Event `json:"statusEvents,omitempty"`
	// Error ends the pass as a failure once its steps and events are done, so that it is retried
	// with backoff (someone else's object in the way, say). Empty for a pass that succeeds.
	Error string `json:"error,omitempty"`
	// Background says nobody waits on this pass's writes: a pool's refill, the re-sync of a
	// Sandbox that is Ready and stays Ready, a template's NetworkPolicy. A controller may hold
	// them while writes somebody waits on (a claim's adoption and status, a Sandbox on its way to
	// Ready) are in flight: on a busy API server they are what those wait behind.
	Background bool `json:"background,omitempty"`
}

// Pass is the plan every kind's plan embeds, for the executor.
func (p *Plan[S]) Pass() *Plan[S] { return p }

// requeue sets RequeueAfter to d if it is sooner (a zero or negative d changes nothing).
func (p *Plan[S]) requeue(d time.Duration) {
	if d > 0 && (p.RequeueAfter.Duration <= 0 || d < p.RequeueAfter.Duration) {
		p.RequeueAfter.Duration = d
	}
}

// NoStatus is the status of a kind that has none (SandboxTemplate).
type NoStatus struct{}

// Step is one write of a pass.
type Step struct {
	Action ChildAction `json:"action"`
	Kind   string      `json:"kind"`
	Name   string      `json:"name"`
	// Intent is what the controller applies for Create, Update and Adopt (nil for Delete).
	Intent *Intent `json:"-"`
	// Reason says why, where the kind's plan tells its steps apart (a pool's deletions).
	Reason string `json:"reason,omitempty"`
	// Precondition is what the API server must still find for the write to go through; nil
	// for an unconditional write.
	Precondition *Precondition `json:"precondition,omitempty"`
	// OnConflict is what the pass does when the precondition fails.
	OnConflict OnConflict `json:"onConflict,omitempty"`
	// Propagation is a delete's propagation policy; nil for the API server's default.
	Propagation *metav1.DeletionPropagation `json:"propagation,omitempty"`
	// Manager is the role whose field manager applies the intent; empty for the controller's own.
	Manager Manager `json:"manager,omitempty"`
	// Concurrent steps that follow one another are sent together in slow-start batches (1, 2,
	// 4, …), each batch once the one before has gone through, as Kubernetes' own controllers
	// create Pods: a failing API server sees one request, not hundreds.
	Concurrent bool `json:"concurrent,omitempty"`
	// Event is what the step adds to the pass's event once it has written (see WrittenEvent).
	Event *Event `json:"event,omitempty"`
}

func (s Step) String() string { return fmt.Sprintf("%s %s %s", s.Action, s.Kind, s.Name) }

// Manager is the role a write is made in, each with a field manager of its own.
type Manager string

const (
	// managerController is the controller's own role (its field manager sandbox-gitops).
	managerController Manager = ""
	// ManagerUpstreamAnnotations writes upstream's annotations into objects users own
	// (UpstreamAnnotations). It is not the controller's field manager: an apply sets exactly
	// the fields its manager owns, so annotations applied as the controller would release the
	// spec it applied to the same Sandbox.
	ManagerUpstreamAnnotations Manager = "UpstreamAnnotations"
)

// Intent is the desired state of one object as a server-side apply controller sends it. Scope
// says which fields the intent decides: none means the whole object (a create, or a child that
// is kept exactly as rendered); otherwise only the listed fields, and every other field the
// controller already manages must be sent again unchanged, or server-side apply would remove
// it. That is how upstream's "a Pod's spec is never updated, only its metadata" is kept: the
// intent of an existing Pod is scoped to its metadata.
type Intent struct {
	Object Object
	// Scope lists field paths ("metadata.labels", "spec.selector") owned by this intent.
	Scope []string
	// Drifted says the child is kept exactly as rendered and the observed one differs from
	// Object in what the render checks. When the controller's own apply configuration is
	// already what it owns, the difference is another manager's (a rule list added to a
	// deny-all policy, a port appended): an apply cannot remove what someone else owns, so the
	// controller replaces the spec instead, as upstream's drift fix does.
	Drifted bool
}

// Scoped field paths of partial intents.
const (
	scopeLabels          = "metadata.labels"
	scopeAnnotations     = "metadata.annotations"
	scopeOwnerReferences = "metadata.ownerReferences"
	scopeSelector        = "spec.selector"
)

// Precondition is what must still hold when a step is sent, checked by the API server: it is
// how a pass that decided on a cached view keeps from overwriting a change it did not see.
type Precondition struct {
	// CreateOnly refuses the write if the object exists: a create never lands on an object the
	// cache does not show (someone else's, or one just made).
	CreateOnly bool `json:"createOnly,omitempty"`
	// ResourceVersion refuses the write if the object changed since it was read.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// UID refuses the write to another object of the same name.
	UID types.UID `json:"uid,omitempty"`
}

// OnConflict is what a pass does when a step's precondition fails.
type OnConflict string

const (
	// conflictSkip leaves the step to the next pass, which the change's watch event brings; the
	// rest of the plan still runs.
	conflictSkip OnConflict = ""
	// ConflictReplan reads the object of the step from the API server and plans the pass again
	// with it (each kind's Found.Saw).
	ConflictReplan OnConflict = "Replan"
)

// Event is an event a plan records on its object.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func normalEvent(reason, message string) Event {
	return Event{Type: corev1.EventTypeNormal, Reason: reason, Message: message}
}

func warningEvent(reason, message string) Event {
	return Event{Type: corev1.EventTypeWarning, Reason: reason, Message: message}
}

// eventNoteLimit is the most bytes the API server takes in an event's note: a longer one is
// refused, and the write is lost.
const eventNoteLimit = 1024

// WrittenEvent is the one event of a pass's steps that wrote: every event costs a write, so a
// pass records at most one, with the type and reason of the first step's and the messages of
// all of them joined with "; ", cut at eventNoteLimit ("…; and 12 more"). Nil when no step
// that wrote has an event.
func WrittenEvent(written []Step) *Event {
	var first *Event
	var msgs []string
	for _, s := range written {
		if s.Event == nil {
			continue
		}
		if first == nil {
			first = s.Event
		}
		msgs = append(msgs, s.Event.Message)
	}
	if first == nil {
		return nil
	}
	return &Event{Type: first.Type, Reason: first.Reason, Message: joinNote(msgs)}
}

// joinNote joins msgs with "; ", keeping as many as fit in eventNoteLimit with a count of the
// rest.
func joinNote(msgs []string) string {
	var b strings.Builder
	for i, m := range msgs {
		sep := ""
		if i > 0 {
			sep = "; "
		}
		more := ""
		if i < len(msgs)-1 {
			more = fmt.Sprintf("; and %d more", len(msgs)-1-i)
		}
		if b.Len()+len(sep)+len(m)+len(more) > eventNoteLimit && i > 0 {
			fmt.Fprintf(&b, "; and %d more", len(msgs)-i)
			return b.String()
		}
		b.WriteString(sep)
		b.WriteString(m)
	}
	return b.String()
}

// appliedEvent is the event part of a step on a Sandbox's child: what the controller did, as
// kubectl says it (Created, Configured, Deleted).
func appliedEvent(action ChildAction, kind, name string) *Event {
	outcome := "Configured"
	switch action {
	case ActionCreate:
		outcome = "Created"
	case ActionDelete:
		outcome = "Deleted"
	}
	e := normalEvent(outcome, fmt.Sprintf("%s %s %q", outcome, kind, name))
	return &e
}

// createStep is a create of obj: create-only, and on a conflict (the name is taken by an object
// the pass did not see) planned again with that object.
func createStep(kind string, obj Object, event *Event) Step {
	return Step{Action: ActionCreate, Kind: kind, Name: obj.GetName(), Intent: &Intent{Object: obj},
		Precondition: &Precondition{CreateOnly: true}, OnConflict: ConflictReplan, Event: event}
}

// deleteStep is a delete of obj, refused if the object of that name is another (its UID).
func deleteStep(kind string, obj metav1.Object, event *Event) Step {
	return Step{Action: ActionDelete, Kind: kind, Name: obj.GetName(), Precondition: &Precondition{UID: obj.GetUID()}, Event: event}
}

// sandboxTypeMeta is a Sandbox's TypeMeta, which every intent carries: the applier sends the
// object as it is.
var sandboxTypeMeta = metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind}

// propagation is the deletion propagation of a step that deletes an object with dependents.
func propagation(p metav1.DeletionPropagation) *metav1.DeletionPropagation { return &p }
