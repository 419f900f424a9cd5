package kbuild

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	template = `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: python
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12-slim
        envFrom:
        - configMapRef:
            name: settings
`
	pool = `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata:
  name: python
spec:
  replicas: %d
  sandboxTemplateRef:
    name: python
`
	others = `apiVersion: v1
kind: Namespace
metadata:
  name: sandboxes
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  LEVEL: "3"
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  annotations:
    note: kept
`
	renderConfig = `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
metadata:
  name: render
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: ./not-used
spec:
  %s
`
)

// tree is a kustomization with a template, a pool, a Namespace, a ConfigMap the template
// references and an object of an unknown kind, with extra kustomization fields and render spec.
func tree(t *testing.T, replicas int, kustomization, spec string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: sandboxes\nresources:\n- template.yaml\n- pool.yaml\n- others.yaml\n" + kustomization + "transformers:\n- render.yaml\n",
		"template.yaml":      template,
		"pool.yaml":          fmt.Sprintf(pool, replicas),
		"others.yaml":        others,
		"render.yaml":        fmt.Sprintf(renderConfig, spec),
	})
	return dir
}

// TestOnePassBuildIsKustomizeBuild builds trees through the one-pass render and through the
// function run as kustomize runs it, and with the real kustomize binary when `make tools` built
// it: the bytes must be equal, and the one-pass render must apply where it should and fall back
// where kustomize's later steps could treat the rendered objects differently.
func TestOnePassBuildIsKustomizeBuild(t *testing.T) {
	self := testenv.SandboxRender(t)
	cases := map[string]struct {
		reason        string
		replicas      int
		kustomization string
		spec          string
		wantFallback  string
	}{
		"plain":         {reason: "the documented layout", replicas: 3, spec: "mode: expand"},
		"large pool":    {reason: "enough objects to show any order difference", replicas: 120, spec: "mode: expand"},
		"keepSources":   {reason: "only the rendered objects and other kinds", replicas: 2, spec: "keepSources: false"},
		"validate":      {reason: "mode validate passes everything through", replicas: 2, spec: "mode: validate"},
		"origins":       {reason: "origin annotations asked for are kept", replicas: 2, kustomization: "buildMetadata: [originAnnotations]\n", spec: "mode: expand"},
		"labels":        {reason: "labels and annotations transformers before the render", replicas: 2, kustomization: "labels:\n- pairs: {team: a}\n  includeSelectors: false\ncommonAnnotations: {owner: a}\n", spec: "mode: expand"},
		"legacy sort":   {reason: "custom legacy order", replicas: 2, kustomization: "sortOptions:\n  order: legacy\n  legacySortOptions:\n    orderFirst: [Pod]\n    orderLast: [Namespace]\n", spec: "mode: expand"},
		"generator":     {reason: "a hashed generator name: kustomize fixes the rendered Pods' references to it, not the Sandbox's", replicas: 2, kustomization: "configMapGenerator:\n- name: settings\n  behavior: replace\n  literals: [A=1]\n", spec: "mode: expand", wantFallback: "configMapGenerator"},
		"fifo":          {reason: "fifo order follows the function's output order", replicas: 2, kustomization: "sortOptions:\n  order: fifo\n", spec: "mode: expand", wantFallback: "sortOptions"},
		"buildMetadata": {reason: "other build metadata", replicas: 2, kustomization: "buildMetadata: [transformerAnnotations]\n", spec: "mode: expand", wantFallback: "buildMetadata"},
		"local-config":  {reason: "local-config objects are rendered, then dropped", replicas: 2, kustomization: "commonAnnotations:\n  config.kubernetes.io/local-config: \"false\"\n", spec: "mode: expand", wantFallback: "local-config"},
	}
	kustomize := ""
	if _, err := os.Stat(filepath.Join(testenv.BinDir(), "kustomize")); err == nil {
		kustomize = testenv.Tool(t, "kustomize")
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := tree(t, tc.replicas, tc.kustomization, tc.spec)
			fast, err := Build(dir, self, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantFallback == "" && !fast.FastPath {
				t.Errorf("%s: fell back: %s", tc.reason, fast.FallbackReason)
			}
			if tc.wantFallback != "" && (fast.FastPath || !strings.Contains(fast.FallbackReason, tc.wantFallback)) {
				t.Errorf("%s: fast path %v, reason %q, want a fallback naming %q", tc.reason, fast.FastPath, fast.FallbackReason, tc.wantFallback)
			}
			slow, err := Build(dir, self, Options{NoFastPath: true})
			if err != nil {
				t.Fatal(err)
			}
			got, err := fast.YAML()
			if err != nil {
				t.Fatal(err)
			}
			want, err := slow.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s: one-pass build differs from the function run by kustomize's library (-exec +one-pass):\n%s", tc.reason, diff)
			}
			if kustomize == "" {
				return
			}
			// The real binary runs the exec path the config names: point it at the binary.
			writeTree(t, dir, map[string]string{"render.yaml": strings.Replace(fmt.Sprintf(renderConfig, tc.spec), "./not-used", self, 1)})
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(kustomize, "build", "--enable-alpha-plugins", "--enable-exec", dir)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("kustomize: %v\n%s", err, stderr.String())
			}
			if diff := cmp.Diff(stdout.String(), string(got)); diff != "" {
				t.Errorf("%s: one-pass build differs from kustomize build (-kustomize +one-pass):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestExecPathNamesFiles: where the one-pass render does not apply, a finding still names its file
// (without originAnnotations in the kustomization), its document and line, and kustomize's
// wrapping of the function's failure does not follow it.
func TestExecPathNamesFiles(t *testing.T) {
	self := testenv.SandboxRender(t)
	dir := tree(t, 1, "", "mode: expand")
	writeTree(t, dir, map[string]string{"pool.yaml": "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata:\n  name: python\nspec:\n  replicas: 1\n  sandboxTemplateRef:\n    name: missing\n"})
	cmd := exec.Command(self, "build", "--no-fast-path", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
		t.Fatalf("exit %d (%v), want 1; stderr:\n%s", code, err, stderr.String())
	}
	if want := filepath.Join(dir, "pool.yaml") + `: document 1 (line 8): error: SandboxWarmPool sandboxes/python: spec.sandboxTemplateRef.name: Not found: "missing"`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	if strings.Contains(stderr.String(), "couldn't execute function") {
		t.Errorf("kustomize's noise follows the finding:\n%s", stderr.String())
	}
	if stdout.Len() > 0 {
		t.Errorf("a failed build wrote output:\n%s", stdout.String())
	}
}

// TestKustomizeWithoutEnableExec pins what docs/gitops.md warns about: kustomize with neither
// flag refuses the tree, and with --enable-alpha-plugins alone skips exec functions silently and
// emits the custom resources with nothing rendered. sandbox-render build of the same tree renders
// them.
func TestKustomizeWithoutEnableExec(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	self := testenv.SandboxRender(t)
	dir := tree(t, 1, "", "mode: expand")
	writeTree(t, dir, map[string]string{"render.yaml": strings.Replace(fmt.Sprintf(renderConfig, "mode: expand"), "./not-used", self, 1)})
	refused, err := exec.Command(kustomize, "build", dir).CombinedOutput()
	if err == nil || !bytes.Contains(refused, []byte("external plugins disabled")) {
		t.Errorf("kustomize with neither flag no longer refuses the tree (%v): update docs/gitops.md, it says it does:\n%s", err, refused)
	}
	out, err := exec.Command(kustomize, "build", "--enable-alpha-plugins", dir).Output()
	if err != nil {
		t.Fatalf("kustomize without --enable-exec failed (%v): update docs/gitops.md, it now says so", err)
	}
	if bytes.Contains(out, []byte("kind: Pod")) || !bytes.Contains(out, []byte("kind: SandboxWarmPool")) {
		t.Errorf("kustomize without --enable-exec now renders (or drops the pool): update docs/gitops.md:\n%s", out)
	}
	res, err := Build(dir, self, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := res.YAML()
	if !bytes.Contains(b, []byte("kind: Pod")) {
		t.Errorf("sandbox-render build rendered nothing:\n%s", b)
	}
}

// TestMalformedRenderConfigMetadata: a render.yaml whose metadata, or its annotations, is a list
// or a scalar is refused with an error, on both paths; kyaml's accessors used to panic on it
// (`metadata: [a]` crashed `sandbox-render build` with a goroutine dump).
func TestMalformedRenderConfigMetadata(t *testing.T) {
	self := testenv.SandboxRender(t)
	cases := map[string]string{
		"metadata a list":          "metadata: [a]",
		"metadata a scalar":        "metadata: a",
		"metadata null":            "metadata: null",
		"annotations a list":       "metadata: {name: render, annotations: [a]}",
		"annotations a scalar":     "metadata: {name: render, annotations: 3}",
		"labels a list":            "metadata: {name: render, labels: [a]}",
		"labels a scalar":          "metadata: {name: render, labels: 3}",
		"annotations a list, only": "metadata: {annotations: [x]}",
		"name a list":              "metadata: {name: [a]}",
		"annotation value a list":  "metadata: {name: render, annotations: {k: [v]}}",
		// With the function annotation, on the one-pass path too: these built, the copy of the
		// config named sandbox-render, without the labels.
		"labels a scalar, to run": "metadata: {name: render, labels: 3, annotations: {config.kubernetes.io/function: 'exec: {path: ./not-used}'}}",
		"name a list, to run":     "metadata: {name: [a], annotations: {config.kubernetes.io/function: 'exec: {path: ./not-used}'}}",
	}
	for name, meta := range cases {
		for _, slow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, NoFastPath %v", name, slow), func(t *testing.T) {
				dir := tree(t, 1, "", "mode: expand")
				config := strings.Replace(fmt.Sprintf(renderConfig, "mode: expand"),
					"metadata:\n  name: render\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: ./not-used\n", meta+"\n", 1)
				writeTree(t, dir, map[string]string{"render.yaml": config})
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("build panicked on %s: %v", meta, p)
						}
					}()
					_, err = Build(dir, self, Options{NoFastPath: slow})
				}()
				if err == nil {
					t.Fatalf("build of a render.yaml with %s succeeded, want an error", meta)
				}
			})
		}
	}
}

// TestNoPanicOnWhatKyamlMisreads: a file of the tree that holds a list where kyaml's accessors
// read a mapping (isMapping), metadata kustomize would misread (checkMetadata), or a patch that
// makes metadata a list inside kustomize (kustomize) is an error on both paths, never a panic:
// each of these crashed sandbox-render build with a goroutine dump, or built an annotation k: [v]
// as k: "". Problems of the files are findings (exit code 1), as render reports them; the rest
// are kustomize's errors (exit code 2).
func TestNoPanicOnWhatKyamlMisreads(t *testing.T) {
	self := testenv.SandboxRender(t)
	config := fmt.Sprintf(renderConfig, "mode: expand")
	cases := map[string]struct {
		reason        string
		kustomization string
		files         map[string]string
		findings      bool
		want          string
	}{
		"config file a list": {
			reason: "isSandboxRenderConfig read the one document's apiVersion",
			files:  map[string]string{"render.yaml": "- a\n"},
			want:   "render.yaml",
		},
		"config file a List of a list": {
			reason:   "kio.ByteReader unwraps a List's items, [a] among them",
			files:    map[string]string{"render.yaml": "apiVersion: v1\nkind: List\nitems:\n- [a]\n"},
			findings: true,
			want:     "items[0] of the List: every item must be an object",
		},
		"config, then a list": {
			reason: "rewriteExecPath read every document's apiVersion, and kio.ByteWriter their annotations",
			files:  map[string]string{"render.yaml": config + "---\n- a\n"},
			want:   "render.yaml",
		},
		"a list in a file naming SandboxRender": {
			reason: "every file holding both words goes through rewriteExecPath",
			files:  map[string]string{"others.yaml": "# " + renderconfig.APIVersion + " " + renderconfig.Kind + "\n- a\n"},
			want:   "others.yaml",
		},
		"annotation value a list": {
			reason:   `kustomize built the template's annotation k: [v] as k: "", and the build succeeded`,
			files:    map[string]string{"template.yaml": strings.Replace(template, "  name: python\n", "  name: python\n  annotations: {k: [v]}\n", 1)},
			findings: true,
			want:     "template.yaml: document 1, line 5: metadata.annotations[k]: Invalid value: \"a list\": must be a string",
		},
		"labels a number on a ConfigMap": {
			reason:   "passed through by kustomize and render alike, and refused by the API server",
			files:    map[string]string{"others.yaml": strings.Replace(others, "  name: settings\n", "  name: settings\n  labels: 3\n", 1)},
			findings: true,
			want:     "others.yaml: document 2, line 10: metadata.labels: Invalid value: 3: must be a mapping of strings to strings",
		},
		"inline patch makes annotations a list": {
			reason:        "kyaml panicked inside kustomize's PatchTransformer",
			kustomization: "patches:\n- patch: |-\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: settings, annotations: [a]}\n",
			want:          "kustomize's PatchTransformer crashed building this tree: runtime error: index out of range",
		},
		"JSON 6902 patch makes metadata a list": {
			reason:        "kyaml panicked inside kustomize's PatchTransformer",
			kustomization: "patches:\n- target: {kind: ConfigMap}\n  patch: |-\n    - {op: replace, path: /metadata, value: [a]}\n",
			want:          "makes an object's metadata, labels or annotations a list",
		},
	}
	for name, tc := range cases {
		for _, slow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, NoFastPath %v", name, slow), func(t *testing.T) {
				dir := tree(t, 1, tc.kustomization, "mode: expand")
				writeTree(t, dir, tc.files)
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("%s: build panicked: %v", tc.reason, p)
						}
					}()
					_, err = Build(dir, self, Options{NoFastPath: slow})
				}()
				var fe *FindingsError
				switch {
				case err == nil:
					t.Fatalf("%s: build succeeded, want an error", tc.reason)
				case errors.As(err, &fe) != tc.findings:
					t.Errorf("%s: findings %v, want %v: %v", tc.reason, !tc.findings, tc.findings, err)
				case !strings.Contains(err.Error(), tc.want):
					t.Errorf("%s: error %q, want one containing %q", tc.reason, err, tc.want)
				}
			})
		}
	}
}
