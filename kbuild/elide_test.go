package kbuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// wideMapping writes n entries "key<i>: <value><i>" at indent.
func wideMapping(n int, indent, value string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%skey%03d: %s%d\n", indent, i, value, i)
	}
	return b.String()
}

// TestElisionIsInvisible builds trees with wide mappings with their mappings elided, as they
// are, and with the real kustomize binary when `make tools` built it: the bytes (or the error)
// must be the same, and the elided build must be used exactly where it is safe.
func TestElisionIsInvisible(t *testing.T) {
	self := testenv.SandboxRender(t)
	defer func(n int) { elideMinKeys = n }(elideMinKeys)
	elideMinKeys = 4
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {app: x}\ndata:\n" + wideMapping(6, "  ", "v")
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n" + strings.ReplaceAll(wideMapping(5, "  ", "\"quoted: "), "\n", "\"\n")
	widget := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  items:\n  - name: a\n    values: {" +
		strings.TrimSuffix(strings.ReplaceAll(wideMapping(5, "", "x"), "\n", ", "), ", ") + "}\n"
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	cases := map[string]struct {
		reason     string
		files      map[string]string
		wantElided bool
		wantErr    bool
	}{
		"data": {reason: "ConfigMap and Secret data under the usual transformers", wantElided: true, files: map[string]string{
			"kustomization.yaml": "namespace: ns\nnamePrefix: p-\ncommonLabels: {team: a}\ncommonAnnotations: {owner: a}\nimages:\n- name: busybox\n  newTag: \"1.36\"\nresources:\n- cm.yaml\n- pod.yaml\n",
			"cm.yaml":            configMap + "---\n" + secret,
			"pod.yaml":           pod,
		}},
		"nested and flow style": {reason: "a flat mapping in a list of a custom resource, written in flow style", wantElided: true, files: map[string]string{
			"kustomization.yaml":      "resources:\n- base\n",
			"base/kustomization.yaml": "resources:\n- widget.yaml\n",
			"base/widget.yaml":        widget,
		}},
		"render": {reason: "the one-pass render passes elided objects through", wantElided: true, files: map[string]string{
			"kustomization.yaml": "namespace: sandboxes\nresources:\n- template.yaml\n- pool.yaml\n- cm.yaml\ntransformers:\n- render.yaml\n",
			"template.yaml":      template,
			"pool.yaml":          fmt.Sprintf(pool, 2),
			"cm.yaml":            configMap,
			"render.yaml":        fmt.Sprintf(renderConfig, "mode: expand"),
		}},
		"metadata": {reason: "metadata is never elided: transformers write into it", files: map[string]string{
			"kustomization.yaml": "commonLabels: {team: a}\nresources:\n- cm.yaml\n",
			"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: l\n  labels:\n" + wideMapping(6, "    ", "v"),
		}},
		"patch": {reason: "a patch may read or write the mapping: built again as it is", files: map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\npatches:\n- patch: |\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: settings}\n    data: {key001: patched}\n",
			"cm.yaml":            configMap,
		}},
		"generator merge": {reason: "a generator merging into the ConfigMap", files: map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\nconfigMapGenerator:\n- name: settings\n  behavior: merge\n  literals: [extra=1]\n",
			"cm.yaml":            configMap,
		}},
		"generator file": {reason: "a file read as data, not as objects", files: map[string]string{
			"kustomization.yaml": "configMapGenerator:\n- name: raw\n  files: [cm.yaml]\n",
			"cm.yaml":            configMap,
		}},
		"labels into data": {reason: "a transformer writing into the mapping leaves the placeholder broken", files: map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\nlabels:\n- pairs: {extra: one}\n  fields:\n  - path: data\n    kind: ConfigMap\n    create: true\n",
			"cm.yaml":            configMap,
		}},
		"duplicate key": {reason: "a repeated key is left to kustomize, which refuses it", wantErr: true, files: map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\n",
			"cm.yaml":            configMap + "  key001: again\n",
		}},
		"not strings": {reason: "values that are not strings are left to kustomize", files: map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\n",
			"cm.yaml":            strings.TrimSuffix(configMap, wideMapping(6, "  ", "v")) + wideMapping(6, "  ", "1"),
		}},
		"anchors": {reason: "an anchored mapping is copied where it is used: left to kustomize", files: map[string]string{
			"kustomization.yaml": "resources:\n- w.yaml\n",
			"w.yaml":             "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  a: &m\n" + wideMapping(5, "    ", "v") + "  b: *m\n",
		}},
		"build fails": {reason: "a tree kustomize cannot build fails with kustomize's error", wantErr: true, files: map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\n- missing.yaml\n",
			"cm.yaml":            configMap,
		}},
	}
	kustomize := ""
	if _, err := os.Stat(filepath.Join(testenv.BinDir(), "kustomize")); err == nil {
		kustomize = testenv.Tool(t, "kustomize")
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			got, gotErr := Build(dir, self, Options{})
			gotOut := outcome(t, got, gotErr)
			want, wantErr := Build(dir, self, Options{NoElide: true})
			wantOut := outcome(t, want, wantErr)
			if strings.HasPrefix(gotOut, "error: ") != tc.wantErr {
				t.Fatalf("%s: %s", tc.reason, gotOut)
			}
			if diff := cmp.Diff(wantOut, gotOut); diff != "" {
				t.Errorf("%s: the build differs with elision (-as is +elided):\n%s", tc.reason, diff)
			}
			if gotErr == nil && got.elided != tc.wantElided {
				t.Errorf("%s: elided %v, want %v", tc.reason, got.elided, tc.wantElided)
			}
			if kustomize == "" {
				return
			}
			if _, ok := tc.files["render.yaml"]; ok {
				writeTree(t, dir, map[string]string{"render.yaml": strings.Replace(tc.files["render.yaml"], "./not-used", self, 1)})
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(kustomize, "build", "--enable-alpha-plugins", "--enable-exec", dir)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				if !tc.wantErr {
					t.Errorf("%s: kustomize failed: %v\n%s", tc.reason, err, stderr.String())
				}
				return
			}
			if diff := cmp.Diff(stdout.String(), gotOut); diff != "" {
				t.Errorf("%s: the build differs from kustomize build (-kustomize +elided):\n%s", tc.reason, diff)
			}
		})
	}
}

// outcome is a build's output, or its error (of the build or of printing it).
func outcome(t *testing.T, res *Result, err error) string {
	t.Helper()
	if err != nil {
		return "error: " + err.Error()
	}
	b, err := res.YAML()
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}
