package controller

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewRESTMapper is controller-runtime's dynamic REST mapper with its successful RESTMapping
// answers remembered. A cache limited to namespaces (--namespaces) asks for the mapping of the
// kind on every read, and each answer walks every known API group's mapper, building an error
// for each group that does not match: a quarter of the controller's allocations at 1,000
// Sandboxes. A kind's resource and scope do not change while its version is served, so the
// first answer is kept; failures are not, so a kind that appears later is still found.
// Use it as the manager's MapperProvider.
func NewRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &memoMapper{RESTMapper: m}, nil
}

type memoMapper struct {
	meta.RESTMapper
	mu       sync.RWMutex
	mappings map[mappingKey]*meta.RESTMapping
}

type mappingKey struct {
	gk       schema.GroupKind
	versions string
}

func (m *memoMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	k := mappingKey{gk: gk, versions: strings.Join(versions, ",")}
	m.mu.RLock()
	mapping, ok := m.mappings[k]
	m.mu.RUnlock()
	if ok {
		return mapping, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.mappings == nil {
		m.mappings = map[mappingKey]*meta.RESTMapping{}
	}
	m.mappings[k] = mapping
	m.mu.Unlock()
	return mapping, nil
}
