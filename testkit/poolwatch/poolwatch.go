// Package poolwatch follows a warm pool's members in the order the API server saw their changes
// (a list, then a watch from it, listed again when the API server closes the watch) and keeps
// the fewest Ready members and the most members (those on their way out included) of any state:
// what a rollout test holds a strategy's bounds to. Polling could miss the moment a bound is
// crossed; the watch sees every state.
package poolwatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Lister lists the Sandboxes of the pool's namespace and returns the list's resourceVersion.
type Lister func(ctx context.Context) ([]agentsv1beta1.Sandbox, string, error)

// Watcher watches the Sandboxes of the pool's namespace from a resourceVersion; its events carry
// *agentsv1beta1.Sandbox (a typed client) or *unstructured.Unstructured (a dynamic one).
type Watcher func(ctx context.Context, resourceVersion string) (watch.Interface, error)

// Watch is a pool being followed.
type Watch struct {
	pool, hash string
	cancel     context.CancelFunc
	done       chan struct{}

	mu       sync.Mutex
	members  map[string]*agentsv1beta1.Sandbox
	minReady int
	maxAll   int
}

// Start lists the pool's members and follows them until Stop.
func Start(ctx context.Context, pool string, list Lister, watchFrom Watcher) (*Watch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watch{pool: pool, hash: render.NameHash(pool), cancel: cancel, done: make(chan struct{}), minReady: -1}
	rv, err := w.list(ctx, list)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if wi, err := watchFrom(ctx, rv); err == nil {
				w.follow(ctx, wi)
			}
			if ctx.Err() == nil {
				if rv, err = w.list(ctx, list); err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
	}()
	return w, nil
}

// follow applies wi's events until it closes or ctx ends.
func (w *Watch) follow(ctx context.Context, wi watch.Interface) {
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			w.apply(ev)
		}
	}
}

// Stop ends the watch and waits for it.
func (w *Watch) Stop() {
	w.cancel()
	<-w.done
}

// Record is the fewest Ready members and the most members seen in any state so far.
func (w *Watch) Record() (minReady, maxAll int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.minReady, w.maxAll
}

// Members are the members as last seen.
func (w *Watch) Members() []*agentsv1beta1.Sandbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*agentsv1beta1.Sandbox, 0, len(w.members))
	for _, sb := range w.members {
		out = append(out, sb)
	}
	return out
}

// Ready reports whether a member counts as Ready: not on its way out, and its Ready condition
// True.
func Ready(sb *agentsv1beta1.Sandbox) bool {
	return sb.DeletionTimestamp == nil && meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
}

// member reports whether sb belongs to the pool: its warm-pool label and its controller.
func (w *Watch) member(sb *agentsv1beta1.Sandbox) bool {
	ref := metav1.GetControllerOf(sb)
	return sb.Labels[agentsv1beta1.SandboxWarmPoolLabel] == w.hash && ref != nil && ref.Kind == extv1beta1.SandboxWarmPoolKind && ref.Name == w.pool
}

// list replaces the members by a fresh list: one state, not one per item.
func (w *Watch) list(ctx context.Context, list Lister) (string, error) {
	items, rv, err := list(ctx)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.members = map[string]*agentsv1beta1.Sandbox{}
	for i := range items {
		if w.member(&items[i]) {
			w.members[items[i].Name] = &items[i]
		}
	}
	w.observe()
	return rv, nil
}

// apply records one watch event.
func (w *Watch) apply(ev watch.Event) {
	if ev.Type == watch.Bookmark || ev.Type == watch.Error {
		return
	}
	sb, err := sandbox(ev.Object)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Type == watch.Deleted || !w.member(sb) {
		delete(w.members, sb.Name)
	} else {
		w.members[sb.Name] = sb
	}
	w.observe()
}

// observe records the state after a change; w.mu is held.
func (w *Watch) observe() {
	ready := 0
	for _, sb := range w.members {
		if Ready(sb) {
			ready++
		}
	}
	if w.minReady < 0 || ready < w.minReady {
		w.minReady = ready
	}
	w.maxAll = max(w.maxAll, len(w.members))
}

// sandbox is a watch event's object as a Sandbox.
func sandbox(obj runtime.Object) (*agentsv1beta1.Sandbox, error) {
	switch o := obj.(type) {
	case *agentsv1beta1.Sandbox:
		return o, nil
	case *unstructured.Unstructured:
		sb := &agentsv1beta1.Sandbox{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, sb); err != nil {
			return nil, err
		}
		return sb, nil
	}
	return nil, fmt.Errorf("a %T in a watch of Sandboxes", obj)
}
