package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the RESTMapping questions that reach it.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

// TestMemoMapper: a mapping found is asked for once; a kind not found is asked for again, so it
// is found once it is served.
func TestMemoMapper(t *testing.T) {
	pods := schema.GroupVersion{Version: "v1"}.WithKind("Pod")
	templates := schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1beta1"}.WithKind("SandboxTemplate")
	type ask struct {
		gvk   schema.GroupVersionKind
		serve bool // add the kind to the underlying mapper first
	}
	type answer struct {
		Resource string
		Scope    meta.RESTScopeName
		Err      bool
		Asked    int // questions the underlying mapper has had so far
	}
	cases := map[string]struct {
		asks []ask
		want []answer
	}{
		"found once, then remembered": {
			asks: []ask{{gvk: pods, serve: true}, {gvk: pods}, {gvk: pods}},
			want: []answer{{"pods", meta.RESTScopeNameNamespace, false, 1}, {"pods", meta.RESTScopeNameNamespace, false, 1}, {"pods", meta.RESTScopeNameNamespace, false, 1}},
		},
		"not found is not remembered": {
			asks: []ask{{gvk: templates}, {gvk: templates, serve: true}, {gvk: templates}},
			want: []answer{{Err: true, Asked: 1}, {"sandboxtemplates", meta.RESTScopeNameNamespace, false, 2}, {"sandboxtemplates", meta.RESTScopeNameNamespace, false, 2}},
		},
		"each version on its own": {
			asks: []ask{{gvk: pods, serve: true}, {gvk: pods.GroupVersion().WithKind("Pod")}, {gvk: schema.GroupVersionKind{Version: "v2", Kind: "Pod"}}},
			want: []answer{{"pods", meta.RESTScopeNameNamespace, false, 1}, {"pods", meta.RESTScopeNameNamespace, false, 1}, {Err: true, Asked: 2}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			underlying := meta.NewDefaultRESTMapper(nil)
			counting := &countingMapper{RESTMapper: underlying}
			m := &memoMapper{RESTMapper: counting}
			var got []answer
			for _, a := range tc.asks {
				if a.serve {
					underlying.Add(a.gvk, meta.RESTScopeNamespace)
				}
				mapping, err := m.RESTMapping(a.gvk.GroupKind(), a.gvk.Version)
				var ans answer
				if err != nil {
					ans.Err = true
				} else {
					ans.Resource, ans.Scope = mapping.Resource.Resource, mapping.Scope.Name()
				}
				ans.Asked = counting.asked
				got = append(got, ans)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}
