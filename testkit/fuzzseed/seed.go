// Package fuzzseed is the seed corpus the fuzz targets share: every input that once crashed,
// hung or passed when it should not have (the repros of issue 12), and the inputs of the golden
// cases. The seeds run in every `go test`; `make fuzz` grows from them.
package fuzzseed

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Repros are the minimal inputs of issue 12, as YAML streams of objects.
var Repros = []string{
	// render.PoolMemberNames ran out of memory.
	"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: t, namespace: d}\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: a, image: b}]\n---\napiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: p, namespace: d}\nspec:\n  replicas: 2147483647\n  sandboxTemplateRef: {name: t}\n",
	"apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxWarmPool\nmetadata: {name: p, namespace: d}\nspec:\n  replicas: 1e9\n  sandboxTemplateRef: {name: t}\n",
	// Duplicate keys; YAML 1.1 booleans.
	"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: a, image: busybox, image: alpine}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\ndata: {flag: yes}\n",
	// Lists where objects belong.
	"[1]\n",
	"- [1]\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: [a]\n",
	"apiVersion: v1\nkind: A\n---\n- [1]\n",
	// Names, namespaces and metadata the API server refuses.
	"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: a/b, namespace: Default}\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: a, image: b}]\n",
	"apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: s, namespace: a_b, bogus: 1, labels: {'bad key': x}}\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: a, ports: [{containerPort: 70000}]}, {name: a, image: b}]\n",
	"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: t}\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: a, image: b}]\n  networkPolicy:\n    egress:\n    - to: [{ipBlock: {cidr: 10.0.0.0/33}}]\n",
	// Messages: v1alpha1 replicas 0.5, a bad shutdownTime, a claim with a typo'd template.
	"apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {name: a, namespace: default}\nspec:\n  replicas: 0.5\n  podTemplate:\n    spec:\n      containers: [{name: a, image: b}]\n",
	"apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: a}\nspec:\n  shutdownTime: '2026-01-01T00:00:00+25:00'\n  podTemplate:\n    spec:\n      containers: [{name: a, image: b}]\n",
	"apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxClaim\nmetadata: {name: c, namespace: d}\nspec:\n  sandboxTemplateRef: {name: pyhton}\n",
	// Aliases and merge keys.
	"apiVersion: v1\nkind: A\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
	"apiVersion: v1\nkind: A\nb: &b {a: 1}\nc: {<<: *b, <<: [*b]}\n",
	"apiVersion: v1\nkind: A\nspec: {x: .inf, y: 0o17, z: 58130e46, w: 2001-01-01}\n",
	"--- {apiVersion: v1, kind: A}\n...\n--- {apiVersion: v1, kind: B}\n",
	// Encodings: UTF-8 only, a byte-order mark only at the very start.
	"\xef\xbb\xbfapiVersion: v1\nkind: A\n",
	"\xff\xfea\x00p\x00i\x00V\x00e\x00r\x00s\x00i\x00o\x00n\x00:\x00 \x00v\x001\x00\n\x00",
	"\x00\x00\xfe\xff\x00\x00\x00a",
	"apiVersion: v1\nkind: A\n---\n\xef\xbb\xbfapiVersion: v1\nkind: B\n",
	"apiVersion: v1\nkind: A\nmetadata: {name: \"a\xef\xbb\xbf\"}\n",
	// Issue 37: UTF-16 after a separator, with its mark and without (NUL bytes), a NUL in a value,
	// a UTF-16 mark in a value; a document after "..." with no "---".
	"apiVersion: v1\nkind: A\n---\n\xff\xfek\x00i\x00n\x00d\x00:\x00 \x00X\x00\n\x00",
	"apiVersion: v1\nkind: A\n---\nk\x00i\x00n\x00d\x00:\x00 \x00X\x00\n\x00",
	"apiVersion: v1\nkind: A\ndata: {k: \"a\x00b\"}\n",
	"apiVersion: v1\nkind: A\ndata: {k: \"a\xff\xfeb\"}\n",
	"apiVersion: v1\nkind: A\n...\napiVersion: v1\nkind: B\n",
	"apiVersion: v1\nkind: A\n...\n# only a comment\n...\n---\napiVersion: v1\nkind: B\n",
	// Issue 37, item 1: metadata, labels and annotations of every shape kyaml's accessors misread
	// (a list of odd length panicked them), on a SandboxRender config, an agent-sandbox object and
	// an object passed through; a document that is a list, and a List's item that is one, in a
	// file naming SandboxRender (kbuild read every document of such a file with kyaml).
	"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: [a]\n",
	"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: a\n",
	"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: null\n",
	"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {annotations: [x]}\n",
	"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {name: [a], labels: 3, annotations: {k: [v], config.kubernetes.io/function: 'exec: {path: ./x}'}}\n",
	"apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {annotations: [x]}\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: a, image: b}]\n",
	"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: t, labels: 3}\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: a, image: b}]\n",
	"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: [a]}\nspec:\n  warmPoolRef: {name: p}\n",
	"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: p, annotations: {k: [v]}}\nspec:\n  replicas: 1\n  sandboxTemplateRef: {name: t}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: null\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: a\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, labels: [a], annotations: {k: [v]}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: [a], annotations: [x]}\n",
	"# render.sandbox-gitops.dev/v1alpha1 SandboxRender\n- a\n",
	"# render.sandbox-gitops.dev/v1alpha1 SandboxRender\napiVersion: v1\nkind: List\nitems:\n- [a]\n",
	"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {name: r, annotations: {config.kubernetes.io/function: 'exec: {path: ./x}'}}\n---\n- a\n",
}

// ResourceLists are the function's repros, as whole ResourceLists.
var ResourceLists = []string{
	"[1]\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- [1]\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: [a]\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n---\n- [1]\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: 5\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n  a: b\n  c: d\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n---\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  spec: {clusterDomain: 'bad domain!', policies: {packs: {restricted: 'yes'}}}\n",
	// Unknown fields of the config: one result each, naming the field and the one meant.
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  spec: {clusterDomian: x, policies: {networkPolicy: {dnsMode: cluster-dns, DNS: x}}}\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n  data: {flag: yes}\n",
	// Lines of spaces inside a literal block: content, which the item-by-item reading and the
	// passed-through text once turned into empty lines.
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n  data:\n    k: |\n      a\n        \n \n      b\n",
	// Issue 37: a malformed ResourceList gives its items back: a duplicate key outside the items
	// (which render refused and the function took), another apiVersion, a second document in
	// UTF-16, a document after "...", a syntax error after the list; a NUL in an item; an invalid
	// functionConfig with items: [], which came back as items: (null).
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nmetadata:\n  name: a\n  name: b\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\nresults:\n- {message: a, message: b}\n",
	"apiVersion: config.kubernetes.io/v2\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n---\n\xff\xfek\x00i\x00n\x00d\x00:\x00 \x00X\x00\n\x00",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n...\napiVersion: v1\nkind: ConfigMap\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n---\na: [\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n  data: {k: \"a\x00b\"}\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  spec: {resources: [{}], policies: {packs: {runtimeClass: {allowed: [\"Bad Name\"]}}}}\n",
	// Issue 37, item 1: a functionConfig's metadata of every shape kyaml misreads, and results
	// that are no list of results (they passed without a word).
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  metadata: [a]\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  metadata: null\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  metadata: {name: [a], labels: 3, annotations: {k: [v]}}\n  spec: {resources: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c, annotations: [x]}}]}\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c, annotations: {config.kubernetes.io/path: [a]}}\nresults: a\n",
	"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults: [[a]]\n",
}

// GoldenInputs are the input files of the golden render cases and of the bad inputs (the files
// of a bad-input directory included), each as one stream.
func GoldenInputs() []string {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..", "golden", "testdata")
	var out []string
	for _, pattern := range []string{"render/*/*.yaml", "bad-input/*.yaml", "bad-input/*/*.yaml"} {
		files, _ := filepath.Glob(filepath.Join(root, pattern))
		sort.Strings(files)
		for _, f := range files {
			switch filepath.Base(f) {
			case "expected.yaml", "config.yaml", "kustomization.yaml":
				continue
			}
			if b, err := os.ReadFile(f); err == nil && len(b) < 64<<10 {
				out = append(out, string(b))
			}
		}
	}
	return out
}

// AsResourceList wraps a stream of objects into a ResourceList, as kustomize hands it to a
// function (items indented under "- ").
func AsResourceList(stream string) string {
	var b strings.Builder
	b.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	for _, doc := range strings.Split(stream, "\n---\n") {
		doc = strings.TrimSpace(doc)
		if doc == "" || strings.HasPrefix(doc, "#") && !strings.Contains(doc, "\n") {
			continue
		}
		b.WriteString("- " + strings.ReplaceAll(doc, "\n", "\n  ") + "\n")
	}
	return b.String()
}
