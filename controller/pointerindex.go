package controller

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// pointerIndex keeps, per key, the objects of one kind the cache holds, as the cache's own
// pointers: what a claim pass reads of its pool (every member, every claim) on every pass. A
// cache List copies each object into the list it returns, and a pool of a thousand members read
// by every pass of a burst of claims was most of the controller's CPU, with the API server
// waiting for the same cores.
//
// It also numbers the objects in the order they came under their key (arrival): the order of
// the informer's events, which is the order upstream's candidate queue is fed in
// (render.ClaimFound.Arrival).
type pointerIndex[T client.Object] struct {
	key func(T) string

	mu   sync.RWMutex
	by   map[string]map[string]indexed[T] // key → namespace/name → object
	next uint64                           // the next arrival number
}

// indexed is an object of the index and the number of its arrival under its key.
type indexed[T client.Object] struct {
	obj     T
	arrival uint64
}

// poolMembers is the index of the cache's Sandboxes by their pool: namespace and warm-pool label.
// One is shared by the claim reconciler (every pass that looks for a member) and the pool
// reconciler (its pre-pass counts the Ready members on every member event of a burst of claims).
func poolMembers() *pointerIndex[*agentsv1beta1.Sandbox] {
	return newPointerIndex(func(sb *agentsv1beta1.Sandbox) string {
		if h := sb.Labels[agentsv1beta1.SandboxWarmPoolLabel]; h != "" {
			return sb.Namespace + "/" + h
		}
		return ""
	})
}

// addIndexHandler keeps an index as the cache's informer of obj's kind changes.
func addIndexHandler(mgr ctrl.Manager, obj client.Object, h toolscache.ResourceEventHandler) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(h)
	return err
}

func newPointerIndex[T client.Object](key func(T) string) *pointerIndex[T] {
	return &pointerIndex[T]{key: key, by: map[string]map[string]indexed[T]{}}
}

// list is the objects under key, in no order (render orders what it reads). They are the
// cache's: never modified.
func (ix *pointerIndex[T]) list(key string) []T {
	objs, _ := ix.listArrivals(key)
	return objs
}

// listArrivals is list with each object's arrival under key, by name (a key's objects share a
// namespace).
func (ix *pointerIndex[T]) listArrivals(key string) ([]T, map[string]uint64) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]T, 0, len(ix.by[key]))
	arrivals := make(map[string]uint64, len(ix.by[key]))
	for _, e := range ix.by[key] {
		out = append(out, e.obj)
		arrivals[e.obj.GetName()] = e.arrival
	}
	return out, arrivals
}

// handler keeps the index as the informer's store changes.
func (ix *pointerIndex[T]) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ix.set(obj) },
		UpdateFunc: func(old, obj any) { ix.update(old, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			ix.remove(obj)
		},
	}
}

func (ix *pointerIndex[T]) set(obj any)    { ix.update(nil, obj) }
func (ix *pointerIndex[T]) remove(obj any) { ix.update(obj, nil) }

// update takes old out of the index and puts obj in (either may be nil), in one step, so that a
// reader never misses an object that stays under its key. An object that stays under its key
// keeps its arrival; one new under a key gets the next.
func (ix *pointerIndex[T]) update(old, obj any) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	kept := map[string]uint64{} // key → arrival of old there
	if o, ok := old.(T); ok {
		if k := ix.key(o); k != "" {
			name := o.GetNamespace() + "/" + o.GetName()
			if e, ok := ix.by[k][name]; ok {
				kept[k] = e.arrival
			}
			delete(ix.by[k], name)
			if len(ix.by[k]) == 0 {
				delete(ix.by, k)
			}
		}
	}
	if o, ok := obj.(T); ok {
		if k := ix.key(o); k != "" {
			if ix.by[k] == nil {
				ix.by[k] = map[string]indexed[T]{}
			}
			arrival, stays := kept[k]
			if !stays {
				arrival = ix.next
				ix.next++
			}
			ix.by[k][o.GetNamespace()+"/"+o.GetName()] = indexed[T]{o, arrival}
		}
	}
}
