package kbuild

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// A tree whose template has two findings (two container ports out of range) in its second
// document, under a render transformer.
const (
	twoFindings = `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: python
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12
        ports:
        - containerPort: 70000
        - containerPort: 80000
`
	// badIndentation fails to parse on line 12, the 7th line of its second document.
	badIndentation        = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: second\n  labels:\n   bad: indentation\n    worse: indentation\n"
	findingsKustomization = "resources:\n- template.yaml\ntransformers:\n- render.yaml\n"
	port0                 = "error: SandboxTemplate python: spec.podTemplate.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive\n"
	port1                 = "error: SandboxTemplate python: spec.podTemplate.spec.containers[0].ports[1].containerPort: Invalid value: 80000: must be between 1 and 65535, inclusive\n"
)

// findingsTree is the tree of twoFindings under dir (a path relative to the working directory).
func findingsTree(dir string) map[string]string {
	return map[string]string{
		dir + "/kustomization.yaml": findingsKustomization,
		dir + "/template.yaml":      twoFindings,
		dir + "/render.yaml":        renderConfigFor("mode: expand"),
	}
}

func renderConfigFor(spec string) string {
	return `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
metadata:
  name: render
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: ./not-used
spec:
  ` + spec + "\n"
}

// TestFindingsPlaced: sandbox-render build names the file of each finding once, as the person
// named the tree (relative to the working directory when the tree was given so).
func TestFindingsPlaced(t *testing.T) {
	self := testenv.SandboxRender(t)
	cases := map[string]struct {
		reason string
		// dir is the tree as given, relative to a working directory holding files.
		dir   string
		files map[string]string
		// want is the report, one line per finding.
		want string
	}{
		"TwoFindingsInOneFile": {
			reason: "two findings of one object printed w/w/template.yaml: the path was joined to the tree once per finding",
			dir:    "w", files: findingsTree("w"),
			want: "w/template.yaml: document 2 (line 17): " + port0 + "w/template.yaml: document 2 (line 18): " + port1,
		},
		"DeeperTree": {
			reason: "deep/er/w/deep/er/w/template.yaml",
			dir:    "deep/er/w", files: findingsTree("deep/er/w"),
			want: "deep/er/w/template.yaml: document 2 (line 17): " + port0 + "deep/er/w/template.yaml: document 2 (line 18): " + port1,
		},
		"WorkingDirectory": {
			reason: "the tree given as . names its files bare",
			dir:    ".", files: findingsTree("."),
			want: "template.yaml: document 2 (line 17): " + port0 + "template.yaml: document 2 (line 18): " + port1,
		},
		"FileOfABase": {
			reason: "a base's file is named from the working directory, as the person would open it",
			dir:    "overlay",
			files: map[string]string{
				"base/kustomization.yaml":    "resources:\n- template.yaml\n",
				"base/template.yaml":         twoFindings,
				"overlay/kustomization.yaml": "resources:\n- ../base\ntransformers:\n- render.yaml\n",
				"overlay/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "base/template.yaml: document 2 (line 17): " + port0 + "base/template.yaml: document 2 (line 18): " + port1,
		},
		"SameNameOtherKind": {
			reason: "the document is the object's, not the first of its name",
			dir:    "w",
			files: map[string]string{
				"w/kustomization.yaml": findingsKustomization,
				"w/template.yaml":      strings.Replace(twoFindings, "name: c\n", "name: python\n", 1),
				"w/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "w/template.yaml: document 2 (line 17): " + port0 + "w/template.yaml: document 2 (line 18): " + port1,
		},
		"Namespaced": {
			reason: "the kustomization's namespace: is not the file's: the object is still found",
			dir:    "w",
			files: map[string]string{
				"w/kustomization.yaml": "namespace: team-a\n" + findingsKustomization,
				"w/template.yaml":      strings.Replace(twoFindings, "name: python\n", "name: python\n  namespace: other\n", 1),
				"w/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "w/template.yaml: document 2 (line 18): " + strings.Replace(port0, "python", "team-a/python", 1) +
				"w/template.yaml: document 2 (line 19): " + strings.Replace(port1, "python", "team-a/python", 1),
		},
		"FieldSetByAPatch": {
			reason: "a field the file does not write (a patch set it) is placed at the nearest field above it the file writes: the container",
			dir:    "w",
			files: map[string]string{
				"w/kustomization.yaml": "resources:\n- template.yaml\npatches:\n- path: patch.yaml\ntransformers:\n- render.yaml\n",
				"w/template.yaml":      strings.Replace(twoFindings, "        ports:\n        - containerPort: 70000\n        - containerPort: 80000\n", "", 1),
				"w/patch.yaml":         "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata:\n  name: python\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: python\n        image: python:3.12\n        ports:\n        - containerPort: 70000\n",
				"w/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "w/template.yaml: document 2 (line 14): " + port0,
		},
		"ResourceNamedWithoutExtension": {
			reason: "a resource file not named *.yaml was left to kustomize, which said yaml: line 7 (of the document, not naming it) in File: s",
			dir:    "w",
			files: map[string]string{
				"w/kustomization.yaml": "resources:\n- s\ntransformers:\n- render.yaml\n",
				"w/s":                  badIndentation,
				"w/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "w/s: document 2, line 12: YAML syntax: mapping values are not allowed in this context\n",
		},
		"PatchNamedWithoutExtension": {
			reason: "kustomize said unable to parse SM or JSON patch from [path: \"p\"], with no line",
			dir:    "w",
			files: map[string]string{
				"w/kustomization.yaml": "resources:\n- template.yaml\npatches:\n- path: p\ntransformers:\n- render.yaml\n",
				"w/template.yaml":      twoFindings,
				"w/p":                  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\nx: [\n",
				"w/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "w/p: document 2, line 6: YAML syntax: did not find expected node content\n",
		},
		"TransformerConfigNamedWithoutExtension": {
			reason: "kustomize said line 5: mapping key \"name\" already defined at line 4, naming no file",
			dir:    "w",
			files: map[string]string{
				"w/kustomization.yaml": "resources:\n- template.yaml\ntransformers:\n- labels\n- render.yaml\n",
				"w/template.yaml":      twoFindings,
				"w/labels":             "apiVersion: builtin\nkind: LabelTransformer\nmetadata:\n  name: a\n  name: b\nlabels: {a: b}\nfieldSpecs: [{path: metadata/labels, create: true}]\n",
				"w/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "w/labels: document 1, line 5: mapping key \"name\" already defined at line 4\n",
		},
		"YAMLError": {
			reason: "a file render cannot read was named by its absolute path",
			dir:    "w",
			files: map[string]string{
				"w/kustomization.yaml": findingsKustomization,
				"w/template.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  name: c\n",
				"w/render.yaml":        renderConfigFor("mode: expand"),
			},
			want: "w/template.yaml: document 2, line 10: mapping key \"name\" already defined at line 9\n",
		},
	}
	for name, tc := range cases {
		// The same whether the render runs in process or as kustomize runs it.
		for _, slow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/NoFastPath=%v", name, slow), func(t *testing.T) {
				root := t.TempDir()
				writeTree(t, root, tc.files)
				t.Chdir(root)
				_, err := Build(tc.dir, self, Options{NoFastPath: slow})
				var fe *FindingsError
				if !errors.As(err, &fe) {
					t.Fatalf("%s: Build(%s) = %v, want findings", tc.reason, tc.dir, err)
				}
				if diff := cmp.Diff(tc.want, fe.Report); diff != "" {
					t.Errorf("%s\nfindings (-want +got):\n%s", tc.reason, diff)
				}
			})
		}
	}
}
