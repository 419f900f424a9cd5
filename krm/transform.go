package krm

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// Output is one item of the function's output: an input item passed through (Node, the very node
// given), or an object the render made (Object).
type Output struct {
	Node   *kyaml.RNode
	Object *unstructured.Unstructured
}

// Transform runs the function in process on items with config, for callers that hold the items
// already (kbuild's one-pass build): the output the function would write, without encoding it,
// and the results. On findings the output is the input and the results say why.
func Transform(items []*kyaml.RNode, config *kyaml.RNode) ([]Output, framework.Results, error) {
	rl := &framework.ResourceList{Items: items, FunctionConfig: config}
	out, err := processNodes(rl)
	if err != nil {
		return nil, rl.Results, err
	}
	return out, rl.Results, nil
}
