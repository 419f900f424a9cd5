package charts

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite the chart's generated templates (make chart)")

// release is how the tests install the chart: as the README does.
const release = "sandbox-gitops"

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "sandbox-gitops") }

// TestGeneratedTemplatesUpToDate: templates/generated/ is exactly what Generate makes from
// config/ now; -update (make chart) rewrites it and removes files it no longer makes.
func TestGeneratedTemplatesUpToDate(t *testing.T) {
	want, err := Generate(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(chartDir(), GeneratedDir)
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v; run make chart", err)
	}
	got := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = b
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[name]; !ok {
			t.Errorf("%s/%s is missing; run make chart", GeneratedDir, name)
		} else if diff := cmp.Diff(string(want[name]), string(got[name])); diff != "" {
			t.Errorf("%s/%s is stale; run make chart (-generated +committed):\n%s", GeneratedDir, name, diff)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s/%s is not generated from config/ any more; run make chart", GeneratedDir, name)
		}
	}
	if n := len(want); n != 7 {
		t.Errorf("Generate made %d templates; want 7 (five CRDs, the ClusterRole and the Role)", n)
	}
}

// TestDefaultValuesAreConfigDefault: with its default values the chart renders every object of
// `kustomize build config/default`, field for field, and nothing else, less Helm's standard
// labels, the CRDs' resource policy and the Namespace.
//
// The Namespace is the one difference, on purpose: Helm stores a release in its namespace before
// it creates any object, so the namespace must exist first (helm install --create-namespace makes
// it), and a chart that also rendered it could not be installed (the Namespace already exists).
// The README says how to give it config's Pod Security label.
func TestDefaultValuesAreConfigDefault(t *testing.T) {
	chart := objectsByKey(t, helmTemplate(t, ""), true)
	config := objectsByKey(t, configDefault(t), false)
	nsKey := "Namespace//" + ConfigNamespace
	if _, ok := config[nsKey]; !ok {
		t.Fatalf("kustomize build config/default has no %s: the exception below is stale", nsKey)
	}
	delete(config, nsKey)
	if diff := cmp.Diff(config, chart); diff != "" {
		t.Errorf("helm template with default values differs from kustomize build config/default (-kustomize +helm):\n%s", diff)
	}
}

// TestReleaseNamespace: installed into another namespace, the chart names config's namespace
// nowhere: every object, flag, subject and the CRDs' webhook Service follow the release.
func TestReleaseNamespace(t *testing.T) {
	out, err := helm(t, "template", release, chartDir(), "--namespace", "team-x",
		"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	if n := bytes.Count(out, []byte(ConfigNamespace)); n > 0 {
		t.Errorf("the chart installed into team-x names %s %d times", ConfigNamespace, n)
	}
	for key := range objectsByKey(t, out, true) {
		if kind, rest, _ := strings.Cut(key, "/"); !strings.HasPrefix(rest, "team-x/") && !clusterScoped[kind] {
			t.Errorf("%s is not in the release namespace", key)
		}
	}
}

var clusterScoped = map[string]bool{"CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true}

// TestLint: helm lint --strict finds nothing with the defaults and with every optional object on,
// but the one INFO below.
func TestLint(t *testing.T) {
	for name, set := range map[string][]string{
		"defaults":   nil,
		"monitoring": {"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", "--namespace", ConfigNamespace, chartDir()}, set...)...)
			if err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				// The project has no logo, so the chart has no icon to point at.
				if line == "[INFO] Chart.yaml: icon is recommended" {
					continue
				}
				if strings.HasPrefix(strings.TrimSpace(line), "[") {
					t.Errorf("helm lint: %s", line)
				}
			}
			if !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint did not lint the chart:\n%s", out)
			}
		})
	}
}

// helm runs the helm that `make tools` built, with its own empty configuration and no cluster.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := testenv.HelmCommand(t, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Errorf("helm %s wrote to stderr:\n%s", strings.Join(args, " "), s)
	}
	return out, nil
}

// helmTemplate renders the chart as `helm install` would into the README's namespace, with
// values (YAML) over the defaults, and fails the test if helm refuses.
func helmTemplate(t *testing.T, values ...string) []byte {
	t.Helper()
	out, err := helmTemplateErr(t, values...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return out
}

func helmTemplateErr(t *testing.T, values ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, chartDir(), "--namespace", ConfigNamespace}
	for i, v := range values {
		if v == "" {
			continue
		}
		f := filepath.Join(t.TempDir(), fmt.Sprintf("values-%d.yaml", i))
		if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", f)
	}
	return helm(t, args...)
}

// configDefault is `kustomize build config/default`, in process as kbuild builds every tree.
func configDefault(t *testing.T) []byte {
	t.Helper()
	res, err := kbuild.Build(filepath.Join(testenv.RepoRoot(), "config", "default"), "", kbuild.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chartLabels are the labels the chart adds to every object it renders (its
// sandbox-gitops.chartLabels), with their values for this chart and release.
func chartLabels(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Name, Version, AppVersion string }
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"helm.sh/chart":                c.Name + "-" + c.Version,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/version":    c.AppVersion,
	}
}

const resourcePolicy = "helm.sh/resource-policy"

// objectsByKey decodes a multi-document stream into objects keyed kind/namespace/name, the
// order-free form the tests compare. From helm, each object must carry the chart's labels, and
// each CRD helm.sh/resource-policy: keep; these are then dropped (and a labels or annotations map
// left empty), so that what remains is comparable with config/. Nothing else is normalised.
func objectsByKey(t *testing.T, stream []byte, fromHelm bool) map[string]map[string]any {
	t.Helper()
	var want map[string]any
	if fromHelm {
		want = chartLabels(t)
	}
	out := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		if obj == nil {
			continue // a document of comments only
		}
		meta, _ := obj["metadata"].(map[string]any)
		key := fmt.Sprintf("%s/%v/%v", obj["kind"], meta["namespace"], meta["name"])
		key = strings.ReplaceAll(key, "<nil>", "")
		if _, dup := out[key]; dup {
			t.Fatalf("two objects %s", key)
		}
		if fromHelm {
			labels, _ := meta["labels"].(map[string]any)
			for k, v := range want {
				if labels[k] != v {
					t.Errorf("%s: label %s is %v, want %v", key, k, labels[k], v)
				}
				delete(labels, k)
			}
			if len(labels) == 0 {
				delete(meta, "labels")
			}
			// The CRDs, and only they, outlive helm uninstall, so that users' sandboxes do.
			annotations, _ := meta["annotations"].(map[string]any)
			if keep, crd := annotations[resourcePolicy] == "keep", obj["kind"] == "CustomResourceDefinition"; keep != crd {
				t.Errorf("%s: annotation %s is %v", key, resourcePolicy, annotations[resourcePolicy])
			}
			delete(annotations, resourcePolicy)
			if annotations != nil && len(annotations) == 0 {
				delete(meta, "annotations")
			}
		}
		out[key] = obj
	}
	return out
}

// defaultArgs are the controller's arguments with the default values (config/manager's).
var defaultArgs = []any{
	"--leader-elect",
	"--leader-election-namespace=" + ConfigNamespace,
	"--metrics-bind-address=:8080",
	"--health-probe-bind-address=:8081",
	"--webhook-port=9443",
	"--webhook-namespace=$(POD_NAMESPACE)",
}

func args(extra ...any) []any { return append(slices.Clone(defaultArgs), extra...) }

const (
	deployment     = "Deployment/" + ConfigNamespace + "/sandbox-gitops-controller"
	serviceMonitor = "ServiceMonitor/" + ConfigNamespace + "/sandbox-gitops-controller"
	prometheusRule = "PrometheusRule/" + ConfigNamespace + "/sandbox-gitops-controller"
	digest         = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// path is a field's place in an object: map keys and list indexes.
type path []any

var (
	podSpec   = path{"spec", "template", "spec"}
	container = path{"spec", "template", "spec", "containers", 0}
)

func (p path) with(more ...any) path { return append(slices.Clone(p), more...) }

// valueCase is one value of values.yaml: set to values (over base), the rendering is the
// rendering of base with the field at path of object set to want, and nothing else changed.
// An object base does not render is new, and only its field at path is compared.
type valueCase struct {
	base, values string
	object       string
	path         path
	want         any
}

// valueCases are keyed by the value they test, as values.yaml spells it;
// TestEveryValueIsTested holds them to values.yaml.
var valueCases = map[string]valueCase{
	"replicas":           {values: "replicas: 3", object: deployment, path: path{"spec", "replicas"}, want: 3.0},
	"image.repository":   {values: "image: {repository: registry.example/ctl}", object: deployment, path: container.with("image"), want: "registry.example/ctl:latest"},
	"image.tag":          {values: "image: {tag: v1.2.3}", object: deployment, path: container.with("image"), want: "ghcr.io/sandbox-gitops/sandbox-controller:v1.2.3"},
	"image.digest":       {values: "image: {digest: " + digest + "}", object: deployment, path: container.with("image"), want: "ghcr.io/sandbox-gitops/sandbox-controller@" + digest},
	"image.pullPolicy":   {values: "image: {pullPolicy: IfNotPresent}", object: deployment, path: container.with("imagePullPolicy"), want: "IfNotPresent"},
	"imagePullSecrets":   {values: "imagePullSecrets: [{name: regcred}]", object: deployment, path: podSpec.with("imagePullSecrets"), want: []any{map[string]any{"name": "regcred"}}},
	"resources":          {values: "resources: {requests: {cpu: 1}, limits: null}", object: deployment, path: container.with("resources"), want: map[string]any{"requests": map[string]any{"cpu": 1.0, "memory": "64Mi"}}},
	"nodeSelector":       {values: "nodeSelector: {kubernetes.io/os: linux}", object: deployment, path: podSpec.with("nodeSelector"), want: map[string]any{"kubernetes.io/os": "linux"}},
	"tolerations":        {values: "tolerations: [{key: dedicated, operator: Exists}]", object: deployment, path: podSpec.with("tolerations"), want: []any{map[string]any{"key": "dedicated", "operator": "Exists"}}},
	"affinity":           {values: "affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: []}}", object: deployment, path: podSpec.with("affinity"), want: map[string]any{"podAntiAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{}}}},
	"podSecurityContext": {values: "podSecurityContext: {fsGroup: 65532}", object: deployment, path: podSpec.with("securityContext", "fsGroup"), want: 65532.0},
	"securityContext":    {values: "securityContext: {runAsNonRoot: true}", object: deployment, path: container.with("securityContext", "runAsNonRoot"), want: true},
	"podAnnotations":     {values: "podAnnotations: {example.com/a: b}", object: deployment, path: path{"spec", "template", "metadata", "annotations"}, want: map[string]any{"example.com/a": "b"}},
	// The selector labels win over podLabels: a Pod the Deployment does not select would be an outage.
	"podLabels": {values: "podLabels: {team: a, app.kubernetes.io/name: other}", object: deployment, path: path{"spec", "template", "metadata", "labels", "team"}, want: "a"},

	"controller.clusterDomain":       {values: "controller: {clusterDomain: example.internal}", object: deployment, path: container.with("args"), want: args("--cluster-domain=example.internal")},
	"controller.policyPacks":         {values: "controller: {policyPacks: [restricted, standalone-network-policy]}", object: deployment, path: container.with("args"), want: args("--policy-packs=restricted,standalone-network-policy")},
	"controller.allowedLabelDomains": {values: "controller: {allowedLabelDomains: [a.example, b.example]}", object: deployment, path: container.with("args"), want: args("--allowed-label-domains=a.example,b.example")},
	"controller.namespaces":          {values: "controller: {namespaces: [team-a, team-b]}", object: deployment, path: container.with("args"), want: args("--namespaces=team-a,team-b")},
	"controller.controllers":         {values: "controller: {controllers: [sandbox, sandboxtemplate]}", object: deployment, path: container.with("args"), want: args("--controllers=sandbox,sandboxtemplate")},
	"controller.kubeAPIQPS":          {values: "controller: {kubeAPIQPS: 50.5}", object: deployment, path: container.with("args"), want: args("--kube-api-qps=50.5")},
	"controller.kubeAPIBurst":        {values: "controller: {kubeAPIBurst: 2000000}", object: deployment, path: container.with("args"), want: args("--kube-api-burst=2000000")},
	"controller.workers.sandbox":     {values: "controller: {workers: {sandbox: 200}}", object: deployment, path: container.with("args"), want: args("--sandbox-workers=200")},
	"controller.workers.template":    {values: "controller: {workers: {template: 2}}", object: deployment, path: container.with("args"), want: args("--template-workers=2")},
	"controller.workers.claim":       {values: "controller: {workers: {claim: 20}}", object: deployment, path: container.with("args"), want: args("--claim-workers=20")},
	"controller.workers.warmPool":    {values: "controller: {workers: {warmPool: 3}}", object: deployment, path: container.with("args"), want: args("--warm-pool-workers=3")},
	"controller.logLevel":            {values: "controller: {logLevel: debug}", object: deployment, path: container.with("args"), want: args("--zap-log-level=debug")},
	"controller.extraArgs":           {values: "controller: {extraArgs: {zap-encoder: console, pprof-bind-address: ':8082'}}", object: deployment, path: container.with("args"), want: args("--pprof-bind-address=:8082", "--zap-encoder=console")},

	"serviceMonitor.enabled": {values: "serviceMonitor: {enabled: true}", object: serviceMonitor, path: path{"spec"}, want: map[string]any{
		"selector":  map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "sandbox-gitops", "app.kubernetes.io/component": "controller"}},
		"endpoints": []any{map[string]any{"port": "metrics", "path": "/metrics"}},
	}},
	"serviceMonitor.labels":        {base: "serviceMonitor: {enabled: true}", values: "serviceMonitor: {labels: {release: prometheus}}", object: serviceMonitor, path: path{"metadata", "labels", "release"}, want: "prometheus"},
	"serviceMonitor.interval":      {base: "serviceMonitor: {enabled: true}", values: "serviceMonitor: {interval: 15s}", object: serviceMonitor, path: path{"spec", "endpoints", 0, "interval"}, want: "15s"},
	"serviceMonitor.scrapeTimeout": {base: "serviceMonitor: {enabled: true}", values: "serviceMonitor: {scrapeTimeout: 5s}", object: serviceMonitor, path: path{"spec", "endpoints", 0, "scrapeTimeout"}, want: "5s"},

	"prometheusRule.enabled":         {values: "prometheusRule: {enabled: true}", object: prometheusRule, path: path{"spec", "groups", 0, "name"}, want: "sandbox-gitops-controller"},
	"prometheusRule.labels":          {base: "prometheusRule: {enabled: true}", values: "prometheusRule: {labels: {role: alert-rules}}", object: prometheusRule, path: path{"metadata", "labels", "role"}, want: "alert-rules"},
	"prometheusRule.additionalRules": {base: "prometheusRule: {enabled: true}", values: "prometheusRule: {additionalRules: [{alert: Mine, expr: vector(1)}]}", object: prometheusRule, path: path{"spec", "groups", 0, "rules", len(alerts)}, want: map[string]any{"alert": "Mine", "expr": "vector(1)"}},
}

// TestValues: each value changes the one field its case names, and nothing else.
func TestValues(t *testing.T) {
	bases := map[string]map[string]map[string]any{}
	for _, c := range valueCases {
		if _, ok := bases[c.base]; !ok {
			bases[c.base] = objectsByKey(t, helmTemplate(t, c.base), true)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(valueCases)) {
		c := valueCases[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each case runs helm; the bases are only read
			want := deepCopy(bases[c.base])
			got := objectsByKey(t, helmTemplate(t, c.base, c.values), true)
			obj, ok := want[c.object]
			if !ok {
				// A new object: compare the field at path only, and the rest of the rendering.
				newObj, ok := got[c.object]
				if !ok {
					t.Fatalf("%s: no %s rendered", name, c.object)
				}
				if diff := cmp.Diff(c.want, get(newObj, c.path)); diff != "" {
					t.Errorf("%s: %s %v (-want +got):\n%s", name, c.object, c.path, diff)
				}
				delete(got, c.object)
			} else {
				if cmp.Equal(get(obj, c.path), c.want) {
					t.Fatalf("%s: %s %v is %v already without the value; the case tests nothing", name, c.object, c.path, c.want)
				}
				set(obj, c.path, c.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		})
	}
}

// TestImage: how image.repository, image.tag and image.digest combine into the controller's
// image reference; with a tag and a digest it is repository:tag@digest, the form install.yaml
// pins and the chart `make release` packages sets (hack/dist's TestChart renders that one).
func TestImage(t *testing.T) {
	cases := map[string]struct {
		reason, values, want string
	}{
		"defaults":       {reason: "the appVersion is the tag", want: "ghcr.io/sandbox-gitops/sandbox-controller:latest"},
		"tag":            {reason: "a tag replaces the appVersion", values: "image: {tag: v1.2.3}", want: "ghcr.io/sandbox-gitops/sandbox-controller:v1.2.3"},
		"digest":         {reason: "a digest alone gets no tag, not the appVersion", values: "image: {digest: " + digest + "}", want: "ghcr.io/sandbox-gitops/sandbox-controller@" + digest},
		"tag and digest": {reason: "as kustomize's images override and install.yaml write it", values: "image: {tag: v1.2.3, digest: " + digest + "}", want: "ghcr.io/sandbox-gitops/sandbox-controller:v1.2.3@" + digest},
		"all three": {reason: "what the packaged chart's values hold", values: "image: {repository: registry.example/x/sandbox-controller, tag: v1.2.3, digest: " + digest + "}",
			want: "registry.example/x/sandbox-controller:v1.2.3@" + digest},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := get(objectsByKey(t, helmTemplate(t, tc.values), true)[deployment], container.with("image"))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: image (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestEveryValueIsTested: every value of values.yaml has a case in valueCases, or is inside one
// (resources.requests.cpu is resources), and every case names a value values.yaml has.
func TestEveryValueIsTested(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			leaves = append(leaves, prefix)
			return
		}
		for k, v := range m {
			if prefix != "" {
				k = prefix + "." + k
			}
			walk(k, v)
		}
	}
	walk("", values)
	slices.Sort(leaves)
	covered := map[string]bool{}
	for _, leaf := range leaves {
		tested := false
		for name := range valueCases {
			if leaf == name || strings.HasPrefix(leaf, name+".") {
				tested, covered[name] = true, true
			}
		}
		if !tested {
			t.Errorf("values.yaml has %s, which no case of valueCases tests", leaf)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(valueCases)) {
		if !covered[name] {
			t.Errorf("valueCases tests %s, which values.yaml does not have", name)
		}
	}
}

func get(v any, p path) any {
	for _, k := range p {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// set returns v with the field at p set to value, making the maps on the way, and appending
// when an index is the list's length.
func set(v any, p path, value any) any {
	if len(p) == 0 {
		return value
	}
	switch k := p[0].(type) {
	case string:
		m, _ := v.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		m[k] = set(m[k], p[1:], value)
		return m
	case int:
		l, _ := v.([]any)
		if k == len(l) {
			l = append(l, nil)
		}
		l[k] = set(l[k], p[1:], value)
		return l
	}
	panic(fmt.Sprintf("path element %v is neither a key nor an index", p[0]))
}

// deepCopy copies decoded YAML: maps, lists and scalars.
func deepCopy[T any](v T) T {
	var cp func(any) any
	cp = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			m := make(map[string]any, len(v))
			for k, e := range v {
				m[k] = cp(e)
			}
			return m
		case map[string]map[string]any:
			m := make(map[string]map[string]any, len(v))
			for k, e := range v {
				m[k] = cp(e).(map[string]any)
			}
			return m
		case []any:
			l := make([]any, len(v))
			for i, e := range v {
				l[i] = cp(e)
			}
			return l
		}
		return v
	}
	return cp(v).(T)
}

// alerts are the PrometheusRule's alerts, in order.
var alerts = []string{
	"SandboxGitopsControllerDown",
	"SandboxGitopsNoLeader",
	"SandboxGitopsReconcileErrors",
	"SandboxGitopsReconcilePanics",
	"SandboxGitopsWorkQueueBacklog",
	"SandboxGitopsSandboxesSlowToReady",
	"SandboxGitopsWarmPoolMisses",
}

var ownMetric = regexp.MustCompile(`\bsandbox_gitops_[a-z_]+`)

// TestAlertRules: every alert has a severity, a summary and a description, selects the metrics
// Service's job in the release namespace, and names only metrics the controller exports: its own
// (controller/metrics.go) by name; controller-runtime's (reconcile, work queue, leader election)
// are those of the controller-runtime in go.mod.
func TestAlertRules(t *testing.T) {
	objs := objectsByKey(t, helmTemplate(t, "prometheusRule: {enabled: true}"), true)
	rules, _ := get(objs[prometheusRule], path{"spec", "groups", 0, "rules"}).([]any)
	metrics, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "controller", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rules {
		r := r.(map[string]any)
		name, _ := r["alert"].(string)
		names = append(names, name)
		expr, _ := r["expr"].(string)
		if strings.Count(expr, `job="sandbox-gitops-controller-metrics",namespace="`+ConfigNamespace+`"`) != strings.Count(expr, "{") {
			t.Errorf("%s: every selector must name the metrics Service's job and namespace: %s", name, expr)
		}
		for _, m := range ownMetric.FindAllString(expr, -1) {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				m = strings.TrimSuffix(m, suffix)
			}
			if !bytes.Contains(metrics, []byte(`"`+m+`"`)) {
				t.Errorf("%s: %s is not a metric of controller/metrics.go", name, m)
			}
		}
		for _, field := range []path{{"labels", "severity"}, {"annotations", "summary"}, {"annotations", "description"}} {
			if s, _ := get(r, field).(string); s == "" || strings.Contains(s, "<no value>") {
				t.Errorf("%s: %v is %q", name, field, s)
			}
		}
	}
	if diff := cmp.Diff(alerts, names); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	// Prometheus's templates reach Prometheus: Helm must not have expanded them.
	if s, _ := get(rules[2], path{"annotations", "summary"}).(string); !strings.Contains(s, "{{ $labels.controller }}") {
		t.Errorf("summary %q lost its Prometheus template", s)
	}
}

// TestRefusedValues: values the chart refuses, each with a message that names the value.
func TestRefusedValues(t *testing.T) {
	cases := map[string]struct{ values, want string }{
		"a misspelt value":               {"replicaCount: 3", "replicaCount"},
		"a tag for a digest":             {"image: {digest: v1.2.3}", "/image/digest"},
		"a pull policy Kubernetes lacks": {"image: {pullPolicy: always}", "/image/pullPolicy"},
		"no workers":                     {"controller: {workers: {sandbox: 0}}", "/controller/workers/sandbox"},
		"leader election off":            {"controller: {extraArgs: {leader-elect: false}}", "controller.extraArgs.leader-elect: the chart sets --leader-elect itself"},
		"a flag that has its value":      {"controller: {extraArgs: {sandbox-workers: 5}}", "controller.extraArgs.sandbox-workers: set controller.workers.sandbox instead"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplateErr(t, c.values)
			if err == nil {
				t.Fatalf("helm template accepted %s", c.values)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("helm template refused %s without saying %q:\n%s", c.values, c.want, out)
			}
		})
	}
}

// TestREADMEDeletesEveryKeptCRD: the README's `kubectl delete crd` command, for after `helm
// uninstall`, names exactly the CRDs the chart keeps (helm.sh/resource-policy: keep).
func TestREADMEDeletesEveryKeptCRD(t *testing.T) {
	root := testenv.RepoRoot()
	files, err := filepath.Glob(filepath.Join(root, "charts", "sandbox-gitops", "templates", "generated", "customresourcedefinition-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("helm.sh/resource-policy: keep")) {
			kept = append(kept, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "customresourcedefinition-"), ".yaml"))
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*kubectl delete crd (.+)$`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no `kubectl delete crd ...` command line")
	}
	named := strings.Fields(string(m[1]))
	slices.Sort(kept)
	slices.Sort(named)
	if len(kept) == 0 {
		t.Fatal("the chart keeps no CRD")
	}
	if diff := cmp.Diff(kept, named); diff != "" {
		t.Errorf("README's kubectl delete crd line against the CRDs the chart keeps (-chart +README):\n%s", diff)
	}
}
