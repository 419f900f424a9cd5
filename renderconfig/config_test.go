package renderconfig

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestConfigFieldErrors: functionConfig errors name the field, the value written and the type
// expected.
func TestConfigFieldErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		// meta, when set, is the config's metadata.
		meta string
		spec string
		want string
	}{
		"BoolAsString": {
			reason: `restricted: "yes" said "functionConfig: unrecognized type: bool" (no field, type backwards)`,
			spec:   `policies: {packs: {restricted: "yes"}}`,
			want:   `spec.policies.packs.restricted: Invalid value: "yes": must be a boolean (true or false)`,
		},
		"ListAsString": {
			reason: "a string where a list is expected",
			spec:   `allowedLabelDomains: example.com`,
			want:   `spec.allowedLabelDomains: Invalid value: "example.com": must be a list`,
		},
		"BadNow": {
			reason: `now: x said parsing time "x" as "2006-01-02T15:04:05Z07:00", without the field`,
			spec:   `now: x`,
			want:   `spec.now: Invalid value: "x": must be an RFC 3339 time such as 2026-06-01T12:00:00Z`,
		},
		"BadClusterDomain": {
			reason: `clusterDomain: "bad domain!" was accepted`,
			spec:   `clusterDomain: "bad domain!"`,
			want:   `spec.clusterDomain: Invalid value: "bad domain!"`,
		},
		"BadLabelDomain": {
			reason: "a label domain no label key can have was accepted, and allowed nothing",
			spec:   `allowedLabelDomains: [sandbox.users.io, "under_score"]`,
			want:   `spec.allowedLabelDomains[1]: Invalid value: "under_score"`,
		},
		"UnknownField": {
			reason: "a misspelt knob",
			spec:   `clusterDomian: example.com`,
			want:   `spec.clusterDomian`,
		},
		"RouterNamespaceInvalid": {
			reason: "a router namespace no namespace can have became a NetworkPolicy the API server refuses",
			spec:   `policies: {networkPolicy: {routers: [{namespace: "Bad_NS", podLabels: {app: r}}]}}`,
			want:   `spec.policies.networkPolicy.routers[0].namespace: Invalid value: "Bad_NS": a namespace name:`,
		},
		"RouterPodLabelKeyInvalid": {
			reason: "a router pod label key that is not a qualified name became a NetworkPolicy the API server refuses",
			spec:   `policies: {networkPolicy: {routers: [{namespace: r, podLabels: {"bad key": r}}]}}`,
			want:   `spec.policies.networkPolicy.routers[0].podLabels: Invalid value: "bad key"`,
		},
		"RouterPodLabelValueInvalid": {
			reason: "a router pod label value that is not a label value became a NetworkPolicy the API server refuses",
			spec:   `policies: {networkPolicy: {routers: [{namespace: r, podLabels: {app: "a b"}}]}}`,
			want:   `spec.policies.networkPolicy.routers[0].podLabels: Invalid value: "a b"`,
		},
		"ClusterDNSNamespaceInvalid": {
			reason: "the DNS peer becomes a NetworkPolicy peer as the routers do",
			spec:   `policies: {networkPolicy: {dns: cluster-dns, clusterDNS: {namespace: "a.b", podLabels: {k8s-app: kube-dns}}}}`,
			want:   `spec.policies.networkPolicy.clusterDNS.namespace: Invalid value: "a.b"`,
		},
		"EgressExceptionWholeSpace": {
			reason: "::/0 as an exception rendered a NetworkPolicy the API server refuses (not a strict subset of ::/0)",
			spec:   `policies: {networkPolicy: {extraEgressExceptions: ["::/0"]}}`,
			want:   `spec.policies.networkPolicy.extraEgressExceptions[0]: Invalid value: "::/0": must be narrower than the whole address space`,
		},
		"NameNotASubdomain": {
			reason: "a SandboxRender named a/b rendered, and the copy in the output was refused by the API server",
			meta:   "{name: a/b}",
			spec:   "mode: expand",
			want:   `metadata.name: Invalid value: "a/b": the render's output carries a copy of this config under its name: a lowercase RFC 1123 subdomain`,
		},
		"NegativeLimit": {
			reason: "a pool limit below 0",
			spec:   `maxPoolReplicas: -1`,
			want:   `spec.maxPoolReplicas: Invalid value: -1`,
		},
		"NegativeClaimReadyDeadline": {
			reason: "a claim's ready deadline below 0",
			spec:   `claimReadyDeadlineSeconds: -5`,
			want:   `spec.claimReadyDeadlineSeconds: Invalid value: -5: must be 0 or more (0 means the default, 600)`,
		},
		"ResourceEmpty": {
			reason: "spec.resources: [{}] was taken by render and validate, exit 2 in the function and exit 1 in build",
			spec:   `resources: [{}]`,
			want:   `spec.resources[0].apiVersion: Required value: every resource is an object, with apiVersion and kind`,
		},
		"ResourceWithoutKind": {
			reason: "each resource is an object, as every listed item is",
			spec:   `resources: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}, {apiVersion: v1}]`,
			want:   `spec.resources[1].kind: Required value`,
		},
		"ResourceAPIVersionNotAVersion": {
			reason: "an apiVersion no request can carry",
			spec:   `resources: [{apiVersion: a/b/c, kind: ConfigMap}]`,
			want:   `spec.resources[0].apiVersion: Invalid value: "a/b/c": apiVersion "a/b/c" must be a version (v1) or a group and a version (apps/v1)`,
		},
		"ResourceMetadataNotAMapping": {
			reason: "metadata is an ObjectMeta",
			spec:   `resources: [{apiVersion: v1, kind: ConfigMap, metadata: [a]}]`,
			want:   `spec.resources[0].metadata: Invalid value:`,
		},
		"MetadataList": {
			reason: "metadata: [a] crashed sandbox-render build in kyaml's accessors (issue 37)",
			meta:   "[a]",
			spec:   "mode: expand",
			want:   "functionConfig: line 3: metadata must be a mapping (name, namespace, labels, ...), not a list",
		},
		"MetadataNull": {
			reason: "metadata: null was taken (the copy named sandbox-render), and kustomize refuses it",
			meta:   "null",
			spec:   "mode: expand",
			want:   "functionConfig: line 3: metadata must be a mapping (name, namespace, labels, ...), not empty (null)",
		},
		"AnnotationsList": {
			reason: "kustomize said wrong node kind, and render dropped them from the copy",
			meta:   "{name: r, annotations: [x]}",
			spec:   "mode: expand",
			want:   `metadata.annotations: Invalid value: "a list": must be a mapping of strings to strings`,
		},
		"LabelsNumber": {
			reason: "labels: 3 was taken, and dropped from the copy",
			meta:   "{name: r, labels: 3}",
			spec:   "mode: expand",
			want:   "metadata.labels: Invalid value: 3: must be a mapping of strings to strings",
		},
		"NameList": {
			reason: "a name that is a list was taken, and the copy named sandbox-render",
			meta:   "{name: [a]}",
			spec:   "mode: expand",
			want:   `metadata.name: Invalid value: "a list": must be a string`,
		},
		"AnnotationValueList": {
			reason: "the exec annotation as a list was taken by render, and kustomize could not run the function",
			meta:   "{name: r, annotations: {config.kubernetes.io/function: [a]}}",
			spec:   "mode: expand",
			want:   `metadata.annotations[config.kubernetes.io/function]: Invalid value: "a list": must be a string`,
		},
		"ResourceMetadataNull": {
			reason: "a resource's metadata: null is no mapping, and not a missing apiVersion",
			spec:   `resources: [{apiVersion: v1, kind: ConfigMap, metadata: null}]`,
			want:   "spec.resources[0].metadata: Invalid value: null: metadata must be a mapping (name, namespace, labels, ...), not empty (null)",
		},
		"ResourceAnnotationValueList": {
			reason: "a resource's metadata is checked as a listed item's",
			spec:   `resources: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c, annotations: {k: [v]}}}]`,
			want:   `spec.resources[0].metadata.annotations[k]: Invalid value: "a list": must be a string`,
		},
		"RuntimeClassNotAName": {
			reason: `runtimeClass.allowed: ["Bad Name"] was taken, and allowed nothing a Pod can name`,
			spec:   `policies: {packs: {runtimeClass: {allowed: [gvisor, "Bad Name"]}}}`,
			want:   `spec.policies.packs.runtimeClass.allowed[1]: Invalid value: "Bad Name": not a RuntimeClass name: a lowercase RFC 1123 subdomain`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			head := "apiVersion: " + APIVersion + "\nkind: " + Kind + "\n"
			if tc.meta != "" {
				head += "metadata: " + tc.meta + "\n"
			}
			_, err := Parse([]byte(head + "spec:\n  " + tc.spec + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nParse error = %v\nwant one containing %q", tc.reason, err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "%!") || strings.Contains(err.Error(), "interface {}")) {
				t.Errorf("%s\nGo internals in the message: %v", tc.reason, err)
			}
		})
	}
}

// TestConfigErrorsAt: a configuration's problems are placed at their fields' lines in the file
// (In), in the render's words, and an unknown field suggests the field it was probably meant to
// be, when one is close.
func TestConfigErrorsAt(t *testing.T) {
	const head = "# The render function.\napiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: render\nspec:\n"
	cases := map[string]struct {
		reason string
		// spec is the spec's body; its first line is line 7 of the file.
		spec string
		// start is where the document starts in its file (ParseAt), 0 for a file of its own.
		start int
		want  string
	}{
		"UnknownFieldSuggested": {
			reason: `said strict decoding error: unknown field "spec.policies.networkPolicy.dnsMode", with no line and in Go's words`,
			spec:   "  allowedLabelDomains: [sandbox.users.io]\n  policies:\n    networkPolicy:\n      dnsMode: cluster-dns\n",
			want:   "render.yaml:10: unknown field `spec.policies.networkPolicy.dnsMode` (did you mean `dns`?)",
		},
		"Misspelt": {
			reason: "two letters swapped are one edit",
			spec:   "  clusterDomian: example.com\n",
			want:   "render.yaml:7: unknown field `spec.clusterDomian` (did you mean `clusterDomain`?)",
		},
		"WrongCase": {
			reason: "encoding/json took DNS for dns silently; a key is spelt as documented",
			spec:   "  policies:\n    networkPolicy:\n      DNS: cluster-dns\n",
			want:   "render.yaml:9: unknown field `spec.policies.networkPolicy.DNS` (did you mean `dns`?)",
		},
		"NothingClose": {
			reason: "no suggestion when no field is close",
			spec:   "  mode: expand\n  colour: blue\n",
			want:   "render.yaml:8: unknown field `spec.colour`",
		},
		"InAList": {
			reason: "a field of a router, in flow style",
			spec:   "  policies:\n    networkPolicy:\n      routers:\n      - {namespace: r,\n         podLabel: {app: r}}\n",
			want:   "render.yaml:11: unknown field `spec.policies.networkPolicy.routers[0].podLabel` (did you mean `podLabels`?)",
		},
		"Several": {
			reason: "every unknown field, in the order of the file",
			spec:   "  keepSource: false\n  clusterDomian: example.com\n",
			want: "render.yaml:7: unknown field `spec.keepSource` (did you mean `keepSources`?); " +
				"render.yaml:8: unknown field `spec.clusterDomian` (did you mean `clusterDomain`?)",
		},
		"WrongType": {
			reason: "a value of the wrong type is at its line",
			spec:   "  policies:\n    packs:\n      restricted: \"yes\"\n",
			want:   `render.yaml:9: spec.policies.packs.restricted: Invalid value: "yes": must be a boolean (true or false)`,
		},
		"Invalid": {
			reason: "a value the validation refuses is at its line",
			spec:   "  mode: expand\n  policies:\n    networkPolicy:\n      dns: quad9\n",
			want:   `render.yaml:10: spec.policies.networkPolicy.dns: Unsupported value: "quad9": supported values: "public-resolvers", "cluster-dns"`,
		},
		"LaterDocument": {
			reason: "a config that is the third document of its file, starting on line 21, is placed at the file's lines",
			spec:   "  clusterDomian: example.com\n", start: 21,
			want: "render.yaml:26: unknown field `spec.clusterDomian` (did you mean `clusterDomain`?)",
		},
		"ResourceAtItsLine": {
			reason: "a resource that is not an object is placed at its line",
			spec:   "  mode: expand\n  resources:\n  - apiVersion: v1\n    kind: ConfigMap\n  - {}\n",
			want:   "render.yaml:11: spec.resources[1].apiVersion: Required value: every resource is an object, with apiVersion and kind",
		},
		"RuntimeClassAtItsLine": {
			reason: "a RuntimeClass name that is not one is placed at its line",
			spec:   "  policies:\n    packs:\n      runtimeClass:\n        allowed:\n        - gvisor\n        - Bad_Name\n",
			want: `render.yaml:12: spec.policies.packs.runtimeClass.allowed[1]: Invalid value: "Bad_Name": not a RuntimeClass name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', ` +
				`and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"MetadataIsOpen": {
			reason: "metadata and spec.resources hold any field",
			spec:   "  resources:\n  - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, anything: 1}\n  mode: fix\n",
			want:   `render.yaml:9: spec.mode: Unsupported value: "fix": supported values: "expand", "validate"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAt([]byte(head+tc.spec), tc.start)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("%s\nParseAt error = %v, want an *Error", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, ce.In("render.yaml")); diff != "" {
				t.Errorf("%s\nIn (-want +got):\n%s", tc.reason, diff)
			}
			if !strings.HasPrefix(err.Error(), "functionConfig: ") && !strings.HasPrefix(err.Error(), "invalid functionConfig SandboxRender: ") {
				t.Errorf("%s\nError() = %q: the function tells a config error by its word functionConfig", tc.reason, err.Error())
			}
		})
	}
}

// TestSuggest: the closest known field, when one is close.
func TestSuggest(t *testing.T) {
	known := []string{"routers", "dns", "clusterDNS", "extraEgressExceptions"}
	cases := map[string]string{
		"dnsMode":                " (did you mean `dns`?)",
		"dsn":                    " (did you mean `dns`?)",
		"router":                 " (did you mean `routers`?)",
		"clusterDns":             " (did you mean `clusterDNS`?)",
		"extraEgressException":   " (did you mean `extraEgressExceptions`?)",
		"egress":                 "",
		"x":                      "",
		"extraIngressExceptions": " (did you mean `extraEgressExceptions`?)",
		// A huge key gets no suggestion, and no table of its size.
		"dns" + strings.Repeat("x", 1<<20): "",
	}
	for written, want := range cases {
		if diff := cmp.Diff(want, suggest(written, known)); diff != "" {
			t.Errorf("suggest(%q) (-want +got):\n%s", written, diff)
		}
	}
}

// FuzzParse: whatever a config file holds, Parse gives a config or an error, never a panic, the
// same error twice, and the lines of its problems are lines of the file.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  policies:\n    networkPolicy:\n      dnsMode: cluster-dns\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec: {DNS: x, clusterDomian: y, policies: {packs: {restricted: 'yes'}}}\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  policies: {networkPolicy: {routers: [{namespace: r, podLabel: {}}]}}\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {x: 1}\nspec:\n  resources: [{a: 1}]\n  now: x\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec: &a\n  mode: *a\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec: [1]\n",
		// Issue 37, item 1: metadata of every shape kyaml's accessors misread.
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: [a]\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: a\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: null\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {annotations: [x]}\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {labels: 3}\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {name: [a]}\n",
		"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  annotations:\n    k: [v]\nspec:\n  resources: [{apiVersion: v1, kind: ConfigMap, metadata: null}, {apiVersion: v1, kind: ConfigMap, metadata: {labels: [a]}}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse(data)
		_, again := Parse(data)
		if (err == nil) != (again == nil) || (err != nil && err.Error() != again.Error()) {
			t.Fatalf("Parse is not deterministic: %v vs %v", err, again)
		}
		var ce *Error
		if !errors.As(err, &ce) {
			return
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, p := range ce.Problems {
			if p.Line < 0 || p.Line > lines || p.Message == "" {
				t.Fatalf("problem %+v: line outside the file's %d, or no message", p, lines)
			}
		}
	})
}

// TestClaimReadyDeadlineOption: the config's seconds become the controller's deadline, and unset
// leaves the render's default.
func TestClaimReadyDeadlineOption(t *testing.T) {
	for spec, want := range map[string]time.Duration{"mode: expand": 0, "claimReadyDeadlineSeconds: 90": 90 * time.Second} {
		c, err := Parse([]byte("apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata: {name: r}\nspec:\n  " + spec + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := c.Options().ClaimReadyDeadline; got != want {
			t.Errorf("%s: ClaimReadyDeadline %v, want %v", spec, got, want)
		}
	}
}
