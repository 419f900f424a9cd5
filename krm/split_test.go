package krm

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
)

// TestReadSplit: reading a ResourceList item by item gives what reading it whole gives (the
// objects, their errors and files, the text each is written back as, the functionConfig), and
// is not used where the layout could read otherwise.
func TestReadSplit(t *testing.T) {
	const head = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"
	const cm = "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    k: |\n      line\n      - not an item\n"
	const fc = "functionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  metadata: {name: r}\n"
	cases := map[string]struct {
		reason string
		input  string
		split  bool
	}{
		"kustomize layout":    {reason: "as kustomize writes it", split: true, input: head + "items:\n" + cm + "- apiVersion: v1\n  kind: Secret\n  metadata: {name: s, annotations: {config.kubernetes.io/path: s.yaml}}\n" + fc},
		"config first":        {reason: "functionConfig before the items", split: true, input: head + fc + "items:\n" + cm},
		"comments and blanks": {reason: "head comments on the dash line, blank lines between items", split: true, input: head + "items:\n- # note\n  apiVersion: v1\n  kind: A\n  metadata: {name: x}\n\n\n" + cm + "results: []\n"},
		"item errors":         {reason: "an item the reader refuses is reported the same", split: true, input: head + "items:\n" + cm + "- apiVersion: v1\n  kind: A\n  metadata: {name: y}\n  spec: {a: 1, a: 2}\n"},
		"spaces in a block":   {reason: "a line of spaces inside a literal block scalar is content, kept as the whole reading keeps it", split: true, input: head + "items:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n  data:\n    k: |\n      foo\n        \n      \n \n      bar\n" + fc},
		"crlf":                {reason: "Windows line ends", split: true, input: "apiVersion: config.kubernetes.io/v1\r\nkind: ResourceList\r\nitems:\r\n- apiVersion: v1\r\n  kind: A\r\n  metadata:\r\n    name: x\r\n"},
		"flow items":          {reason: "a flow list is not cut", input: head + "items: [{apiVersion: v1, kind: A, metadata: {name: x}}]\n"},
		"flow item":           {reason: "an item in flow style", input: head + "items:\n- {apiVersion: v1, kind: A, metadata: {name: x}}\n"},
		"indented items":      {reason: "items indented under the key", input: head + "items:\n  - apiVersion: v1\n    kind: A\n    metadata: {name: x}\n"},
		"alias across items":  {reason: "an alias to another item's anchor", input: head + "items:\n- apiVersion: v1\n  kind: A\n  metadata: &m {name: x}\n- apiVersion: v1\n  kind: B\n  metadata: *m\n"},
		"quoted over an item": {reason: "a quoted value running over a dash line", input: head + "items:\n- apiVersion: v1\n  kind: A\n  metadata: {name: \"x\n- y\"}\n"},
		"comment at column 0": {reason: "a comment between items at column 0", input: head + "items:\n" + cm + "# between\n" + cm},
		"item is a list":      {reason: "an item that is not an object: the whole reading reports it", input: head + "items:\n- - a\n"},
		"directive":           {reason: "a directive before the document", input: "%YAML 1.2\n---\n" + head + "items:\n" + cm},
		"two documents":       {reason: "two ResourceLists", input: head + "items:\n" + cm + "---\n" + head + "items:\n" + cm},
		"not a ResourceList":  {reason: "another kind", input: "apiVersion: v1\nkind: List\nitems:\n" + cm},
		"items in a string":   {reason: "\"items:\" at column 0 inside a quoted value", input: "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nnote: \"a\nitems:\"\n"},
		"duplicate items":     {reason: "items twice", input: head + "items:\n" + cm + "items:\n" + cm},
		"items with a value":  {reason: "items: on the same line", input: head + "items: []\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := compareReadings([]byte(tc.input)); diff != "" {
				t.Fatalf("%s:\n%s", tc.reason, diff)
			}
			if _, _, _, ok := readSplit([]byte(tc.input)); ok != tc.split {
				t.Errorf("%s: read item by item %v, want %v", tc.reason, ok, tc.split)
			}
		})
	}
}

// compareReadings reads data item by item and whole; where the first applies, both must agree.
// It returns what differs, or "".
func compareReadings(data []byte) string {
	rl, srcs, texts, ok := readSplit(data)
	if !ok {
		return ""
	}
	whole, root, bad := readResourceList(data)
	if bad != nil {
		return "read item by item, but malformed read whole: " + bad.Message
	}
	wsrcs, wtexts, err := readItems(data, root, whole.Items)
	if err != nil {
		return "read item by item, but the whole reading failed: " + err.Error()
	}
	type reading struct {
		Objects []map[string]any
		Errors  []string
		Files   []string
		Texts   []string
		Config  string
	}
	of := func(fc interface{ String() (string, error) }, srcs []source, texts [][]byte) reading {
		var r reading
		for i, s := range srcs {
			var obj map[string]any
			if s.obj != nil {
				obj = s.obj.Object
			}
			r.Objects = append(r.Objects, obj)
			r.Errors = append(r.Errors, errText(s.err))
			file := ""
			if s.file != nil {
				file = s.file.Path
			}
			r.Files = append(r.Files, file)
			r.Texts = append(r.Texts, string(texts[i]))
		}
		if fc != nil {
			r.Config, _ = fc.String()
		}
		return r
	}
	var fc, wfc interface{ String() (string, error) }
	if rl.FunctionConfig != nil {
		fc = rl.FunctionConfig
	}
	if whole.FunctionConfig != nil {
		wfc = whole.FunctionConfig
	}
	if diff := cmp.Diff(of(wfc, wsrcs, wtexts), of(fc, srcs, texts)); diff != "" {
		return diff
	}
	// Both readings share the texts passed through: each must read as its item does.
	for i, text := range wtexts {
		if text == nil || wsrcs[i].obj == nil {
			continue
		}
		var doc kyaml.Node
		if err := kyaml.Unmarshal(text, &doc); err != nil || len(doc.Content) != 1 {
			return fmt.Sprintf("item %d's text does not read as one document (%v):\n%s", i, err, text)
		}
		obj, err := manifest.NodeObject(doc.Content[0])
		if err != nil {
			return fmt.Sprintf("item %d's text: %v", i, err)
		}
		if diff := cmp.Diff(wsrcs[i].obj.Object, obj.Object); diff != "" {
			return fmt.Sprintf("item %d's text reads differently from the item (-item +text):\n%s", i, diff)
		}
	}
	return ""
}
