package yamlread

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFieldLine: a finding's field is found at its own line in the stream, however it is written;
// a field that is not written is placed at the nearest field above it that is.
func TestFieldLine(t *testing.T) {
	const template = `# a comment
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: python
  labels:
    app.kubernetes.io/name: python
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12
        imagePullPolicyy: IfNotPresent
      - {name: sidecar, image: busybox,
         ports: [{containerPort: 70000}]}
`
	cases := map[string]struct {
		reason string
		in     string
		path   string
		want   int
	}{
		"UnknownField": {
			reason: "a mistyped container field was reported at the document's first line",
			in:     template, path: "spec.podTemplate.spec.containers[0].imagePullPolicyy", want: 14,
		},
		"TopLevel": {
			reason: "a field of the object itself",
			in:     template, path: "metadata.name", want: 5,
		},
		"ListItem": {
			reason: "a list item is at its dash",
			in:     template, path: "spec.podTemplate.spec.containers[1]", want: 15,
		},
		"FlowStyle": {
			reason: "a field written in flow style, on the second line of its item",
			in:     template, path: "spec.podTemplate.spec.containers[1].ports[0].containerPort", want: 16,
		},
		"KeyInBrackets": {
			reason: "field.Path writes a map key in brackets, dots and slashes included",
			in:     template, path: "metadata.labels[app.kubernetes.io/name]", want: 7,
		},
		"DottedKeyWithoutBrackets": {
			reason: "the schema validation writes a key holding dots as more fields",
			in:     template, path: "metadata.labels.app.kubernetes.io/name", want: 7,
		},
		"MissingField": {
			reason: "a required field that is not written is placed at the item that lacks it",
			in:     template, path: "spec.podTemplate.spec.containers[0].resources.limits", want: 12,
		},
		"IndexOutOfRange": {
			reason: "an item that is not written (a default, a patch) is placed at its list",
			in:     template, path: "spec.podTemplate.spec.containers[5].name", want: 11,
		},
		"NotWrittenAtAll": {
			reason: "no field of the path is written: the caller places it at the document",
			in:     template, path: "status.phase", want: 0,
		},
		"EmptyPath": {
			reason: "a finding on no field",
			in:     template, path: "", want: 0,
		},
		"IndexOnAMapping": {
			reason: "an index where the file has a mapping goes no further",
			in:     template, path: "spec.podTemplate[0].spec", want: 9,
		},
		"Alias": {
			reason: "an alias is followed to the node it names",
			in:     "a: &x\n  b:\n    c: 1\nd: *x\n", path: "d.b.c", want: 3,
		},
		"SecondDocument": {
			reason: "lines are the stream's, not the document's",
			in:     "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\nspec:\n  x: 1\n", path: "spec.x", want: 7,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes, err := ReadNodes([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got := FieldLine(nodes[len(nodes)-1].Node, tc.path)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nFieldLine(%q) (-want +got):\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

// FuzzFieldLine: whatever the YAML and the path, FieldLine never panics and gives a line of the
// input or 0.
func FuzzFieldLine(f *testing.F) {
	f.Add("spec:\n  containers:\n  - name: a\n", "spec.containers[0].name")
	f.Add("a: {b: [1, 2]}\n", "a.b[1]")
	f.Add("a: {b: [1, 2]}\n", "a.b[-1]")
	f.Add("a: {b: [1, 2]}\n", "a[b]]")
	f.Add("a.b: 1\na: {b: 2}\n", "a.b")
	f.Add("a: &x {b: *x}\n", "a.b.b.b")
	f.Fuzz(func(t *testing.T, in, path string) {
		nodes, err := ReadNodes([]byte(in))
		if err != nil || len(nodes) == 0 {
			return
		}
		lines := 1 + len(in) // at most
		if got := FieldLine(nodes[0].Node, path); got < 0 || got > lines {
			t.Fatalf("FieldLine(%q) = %d, outside the input", path, got)
		}
	})
}
