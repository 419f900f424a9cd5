package controller

import (
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pointerIndex keeps, per key, the objects of one kind the cache holds, as the cache's own
// pointers: what a claim pass reads of its pool (every member, every claim) on every pass. A
// cache List copies each object into the list it returns, and a pool of a thousand members read
// by every pass of a burst of claims was most of the controller's CPU, with the API server
// waiting for the same cores.
type pointerIndex[T client.Object] struct {
	key func(T) string

	mu sync.RWMutex
	by map[string]map[string]T // key → namespace/name → object
}

func newPointerIndex[T client.Object](key func(T) string) *pointerIndex[T] {
	return &pointerIndex[T]{key: key, by: map[string]map[string]T{}}
}

// list is the objects under key, in no order (render orders what it reads). They are the
// cache's: never modified.
func (ix *pointerIndex[T]) list(key string) []T {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]T, 0, len(ix.by[key]))
	for _, o := range ix.by[key] {
		out = append(out, o)
	}
	return out
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
// reader never misses an object that stays under its key.
func (ix *pointerIndex[T]) update(old, obj any) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if o, ok := old.(T); ok {
		if k := ix.key(o); k != "" {
			delete(ix.by[k], o.GetNamespace()+"/"+o.GetName())
			if len(ix.by[k]) == 0 {
				delete(ix.by, k)
			}
		}
	}
	if o, ok := obj.(T); ok {
		if k := ix.key(o); k != "" {
			if ix.by[k] == nil {
				ix.by[k] = map[string]T{}
			}
			ix.by[k][o.GetNamespace()+"/"+o.GetName()] = o
		}
	}
}
