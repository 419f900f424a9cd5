package golden

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/migrate"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/goldencase"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// The differential corpus: every render case's input, mutated mutantsPerCase times. Fixed
// seeds, so a failure is the same failure on every run; the size keeps the test to seconds of
// render and about a thousand dry runs.
const (
	differentialSeed = 21
	mutantsPerCase   = 16
)

// TestRenderAcceptsWhatTheAPIServerAccepts is the differential test of issue 21: a corpus of
// mutated golden inputs goes through the render as the CLI runs it (reader, SandboxRender config,
// bundle.Expand, sources converted to v1beta1), and every object of every render that succeeds
// is created with a server-side dry run (dryRun=All) on a real kube-apiserver with our CRDs
// installed. Whatever the render accepts, the API server must accept: every refusal fails the
// test, naming the mutant and the object. Objects of kinds the API server does not know (a
// mutated apiVersion or kind makes a pass-through object of an unknown kind) are passed through
// by the render untouched and cannot be checked; they are listed.
//
// Mutations touch the agent-sandbox documents and the SandboxRender config, what the render
// validates; the pass-through objects of the golden inputs (ConfigMaps, earlier renders) stay as
// written, so a refusal of one means the render changed it.
func TestRenderAcceptsWhatTheAPIServerAccepts(t *testing.T) {
	corpus := differentialCorpus(t)
	cfg, _ := testenv.StartAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d := &dryRunner{c: c, created: map[string]error{}}

	// The check can fail: an object the render must never accept is refused.
	refused := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "default"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i", "env": []any{map[string]any{"name": ""}}}}},
	}}
	if unknown, err := d.create(ctx, refused); unknown || err == nil {
		t.Fatalf("a Pod with an empty env var name was not refused (unknown kind %v): the check cannot fail", unknown)
	}

	type job struct {
		mutant int
		obj    *unstructured.Unstructured
	}
	var jobs []job
	accepted := 0
	for i, m := range corpus {
		objs, ok := renderMutant(m)
		if !ok {
			continue
		}
		accepted++
		for _, o := range objs {
			jobs = append(jobs, job{i, o})
		}
	}
	var mu sync.Mutex
	var failures []string
	unknownKinds := map[string]int{}
	work := make(chan job)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range work {
				unknown, err := d.create(ctx, j.obj)
				mu.Lock()
				switch {
				case unknown:
					unknownKinds[j.obj.GetAPIVersion()+" "+j.obj.GetKind()]++
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: %s %s: %v\n--- input:\n%s--- config:\n%s",
						corpus[j.mutant].name, j.obj.GetKind(), describeObject(j.obj), err, corpus[j.mutant].stream, corpus[j.mutant].config))
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()

	t.Logf("%d mutants, %d rendered, %d objects dry-run", len(corpus), accepted, len(jobs))
	var kinds []string
	for k, n := range unknownKinds {
		kinds = append(kinds, fmt.Sprintf("%s (%d objects)", k, n))
	}
	sort.Strings(kinds)
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	t.Logf("kinds the API server does not know, passed through untouched: %s", strings.Join(kinds, ", "))
	if accepted < len(corpus)/10 || len(jobs) < 200 {
		t.Errorf("only %d of %d mutants rendered (%d objects): the corpus checks too little", accepted, len(corpus), len(jobs))
	}
	sort.Strings(failures)
	for _, f := range failures {
		t.Errorf("the render accepted what the API server refuses: %s", f)
	}
}

func describeObject(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// dryRunner creates objects with dryRun=All, creating their namespaces (and RuntimeClasses) for
// real first.
type dryRunner struct {
	c client.Client
	// strict refuses unknown fields, as kubectl's default field validation does; without it the
	// API server drops them with a warning.
	strict  bool
	mu      sync.Mutex
	created map[string]error
}

// create dry-runs the creation of o. unknown reports a kind the API server does not serve.
func (d *dryRunner) create(ctx context.Context, o *unstructured.Unstructured) (unknown bool, err error) {
	o = o.DeepCopy()
	namespaced, err := d.c.IsObjectNamespaced(o)
	if meta.IsNoMatchError(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if namespaced {
		if o.GetNamespace() == "" {
			o.SetNamespace("default") // as kubectl applies an object without a namespace
		}
		if err := d.prerequisite(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}}); err != nil {
			return false, err
		}
	}
	// A Pod's RuntimeClass must exist (admission refuses the Pod otherwise): the cluster the
	// policy packs are written for has it.
	if rc, _, _ := unstructured.NestedString(o.Object, "spec", "runtimeClassName"); o.GetKind() == "Pod" && rc != "" {
		if err := d.prerequisite(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rc}, Handler: "runc"}); err != nil {
			return false, err
		}
	}
	opts := []client.CreateOption{client.DryRunAll}
	if d.strict {
		opts = append(opts, client.FieldValidation(metav1.FieldValidationStrict))
	}
	return false, d.c.Create(ctx, o, opts...)
}

// prerequisite creates obj for real, once: a namespace or a RuntimeClass an object needs. An
// error creating it is the object's (an invalid namespace name is the object's namespace).
func (d *dryRunner) prerequisite(ctx context.Context, obj client.Object) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := fmt.Sprintf("%T %s", obj, obj.GetName())
	if err, done := d.created[key]; done {
		return err
	}
	err := d.c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("creating its %T %q: %w", obj, obj.GetName(), err)
	}
	d.created[key] = err
	return err
}

// mutant is one input of the corpus: a YAML stream and a SandboxRender config.
type mutant struct {
	name           string
	stream, config []byte
}

// renderMutant renders a mutant as `sandbox-render render` does, reporting whether it rendered.
func renderMutant(m mutant) ([]*unstructured.Unstructured, bool) {
	out, err := renderMutantErr(m)
	return out, err == nil
}

// renderMutantErr is renderMutant with the reason a mutant did not render.
func renderMutantErr(m mutant) ([]*unstructured.Unstructured, error) {
	objs, err := manifest.Parse("input.yaml", m.stream)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, errors.New("no objects")
	}
	cfg, err := renderconfig.Parse(m.config)
	if err != nil {
		return nil, err
	}
	// Sources kept as v1alpha1 are for clusters that serve it through the conversion webhook,
	// which this API server does not run (TestV1alpha1RendersApplyToOurCRDs covers them).
	cfg.Spec.KeepSourceVersions = false
	opts := cfg.Options()
	// Small pools keep the corpus fast; the limits are tested elsewhere.
	if opts.MaxPoolReplicas == 0 || opts.MaxPoolReplicas > 20 {
		opts.MaxPoolReplicas = 20
	}
	out, err := bundle.Expand(objs, opts)
	if err != nil {
		return nil, err
	}
	return migrate.Objects(out)
}

// richConfig is a SandboxRender config with every knob that reaches an object set, so that
// mutations of the config reach the NetworkPolicy and the pods.
const richConfig = `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
spec:
  clusterDomain: cluster.local
  allowedLabelDomains: [sandbox.users.io, corp.example.com]
  policies:
    networkPolicy:
      routers:
      - namespace: agent-sandbox-system
        podLabels: {app: sandbox-router}
      dns: cluster-dns
      clusterDNS: {namespace: kube-system, podLabels: {k8s-app: kube-dns}}
      extraEgressExceptions: [100.64.0.0/10]
`

// differentialCorpus is every render case's input with its config (as the SandboxRender a
// directory's render.yaml would hold) or the rich config, each mutated: most mutants change values,
// keys or list items of the decoded objects or config (interesting values, as a fuzzer's
// dictionary holds them), the rest the bytes of one agent-sandbox document (deletions,
// insertions and copies, as Go's fuzzing engine mutates).
func differentialCorpus(t *testing.T) []mutant {
	t.Helper()
	dirs, err := filepath.Glob("testdata/render/*")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	var out []mutant
	for ci, dir := range dirs {
		if strings.HasPrefix(filepath.Base(dir), "err-") {
			continue // refused as written; a mutation rarely mends it
		}
		objs, err := goldencase.ReadInputs(dir)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := goldencase.ReadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		own := caseSandboxRender(t, cc)
		for i := range mutantsPerCase {
			r := rand.New(rand.NewPCG(differentialSeed, uint64(ci*1000+i)))
			objs := deepCopy(objs)
			var config map[string]any
			if err := yaml.Unmarshal(own, &config); err != nil {
				t.Fatal(err)
			}
			if r.IntN(2) == 0 {
				if err := yaml.Unmarshal([]byte(richConfig), &config); err != nil {
					t.Fatal(err)
				}
			}
			var stream []byte
			switch n := r.IntN(10); {
			case n < 2: // the config
				mutateTree(r, config, mutations(r))
				stream = encodeAll(t, objs)
			case n < 8: // values of the objects
				var own []any
				for _, o := range objs {
					if manifest.IsAgentSandbox(o) {
						own = append(own, o.Object)
					}
				}
				mutateTree(r, own, mutations(r))
				stream = encodeAll(t, objs)
			default: // bytes of one document
				stream = mutateBytes(t, r, objs)
			}
			cfgText, err := yaml.Marshal(config)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, mutant{name: fmt.Sprintf("%s#%d", filepath.Base(dir), i), stream: stream, config: cfgText})
		}
	}
	return out
}

// mutations is how many mutations a mutant gets: mostly one, so that most mutants stay close
// enough to valid input to be rendered.
func mutations(r *rand.Rand) int {
	switch n := r.IntN(10); {
	case n < 6:
		return 1
	case n < 9:
		return 2
	}
	return 3
}

// caseSandboxRender is a case's config.yaml as a SandboxRender.
func caseSandboxRender(t *testing.T, cc goldencase.Config) []byte {
	spec := map[string]any{}
	if cc.ClusterDomain != "" {
		spec["clusterDomain"] = cc.ClusterDomain
	}
	if cc.Now != nil {
		spec["now"] = cc.Now
	}
	if cc.KeepSourceVersions {
		spec["keepSourceVersions"] = true
	}
	if o := cc.Options; o != nil {
		spec["policies"] = o.Policies
		if o.AllowedLabelDomains != nil {
			spec["allowedLabelDomains"] = o.AllowedLabelDomains
		}
		if o.DisableWarmPoolEviction {
			spec["disableWarmPoolEviction"] = true
		}
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": renderconfig.APIVersion, "kind": renderconfig.Kind, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeAll(t *testing.T, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	b, err := manifest.Encode(objs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// interesting are the values a mutation writes: what the API server's validation draws lines at
// (empty, "=", spaces, slashes, capitals, 63 and 253 characters, ports, enum-like words) and
// values of other types.
var interesting = []any{
	"", "=", "A=B", "a b", "Bad_Key", "a/b/c", "example.com/", "-a", "a.", "UPPER", "x", "é", "\t",
	strings.Repeat("a", 64), strings.Repeat("a", 254), "ReadWriteSometimes", "ReadWriteOnce",
	"10.0.0.0/33", "::/0", "*", "List", "v1", "1Gi", "2026-01-01T00:00:00Z",
	int64(0), int64(-1), int64(1), int64(65536), int64(2147483648), 1.5, true, nil,
	[]any{}, map[string]any{}, []any{"a"}, []any{int64(5)}, map[string]any{"a": "b"}, map[string]any{"bad key": "x"},
}

// interestingKeys are the keys a mutation renames a mapping key to.
var interestingKeys = []string{"", "bad key", "a=b", "example.com/x", "-x", "x/y/z", "UPPER", strings.Repeat("k", 64), "kind", "items"}

// mutateTree applies n mutations to values inside root (an object, or a list of objects), each at
// a position drawn uniformly from every mapping entry and list item below it.
func mutateTree(r *rand.Rand, root any, n int) {
	for range n {
		type slot struct {
			parent any // map[string]any or []any
			key    string
			index  int
		}
		var slots []slot
		var walk func(v any)
		walk = func(v any) {
			switch t := v.(type) {
			case map[string]any:
				keys := make([]string, 0, len(t))
				for k := range t {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					slots = append(slots, slot{parent: t, key: k})
					walk(t[k])
				}
			case []any:
				for i, e := range t {
					slots = append(slots, slot{parent: t, index: i})
					walk(e)
				}
			}
		}
		if list, ok := root.([]any); ok {
			for _, e := range list { // the objects themselves stay
				walk(e)
			}
		} else {
			walk(root)
		}
		if len(slots) == 0 {
			return
		}
		s := slots[r.IntN(len(slots))]
		var old any
		switch p := s.parent.(type) {
		case map[string]any:
			old = p[s.key]
		case []any:
			old = p[s.index]
		}
		value := runtime.DeepCopyJSONValue(interestingValue(r, old))
		switch p := s.parent.(type) {
		case map[string]any:
			switch r.IntN(6) {
			case 0:
				delete(p, s.key)
			case 1:
				v := p[s.key]
				delete(p, s.key)
				p[interestingKeys[r.IntN(len(interestingKeys))]] = v
			default:
				p[s.key] = value
			}
		case []any:
			switch r.IntN(4) {
			case 0: // a copy of another item of the list, as the engine copies a chunk
				p[s.index] = runtime.DeepCopyJSONValue(p[r.IntN(len(p))])
			default:
				p[s.index] = value
			}
		}
	}
}

// interestingValue draws a value to replace old: mostly one of old's type (a value of another
// type is refused by the schema, so such mutants test little), sometimes any.
func interestingValue(r *rand.Rand, old any) any {
	if r.IntN(5) > 0 {
		var same []any
		for _, v := range interesting {
			if fmt.Sprintf("%T", v) == fmt.Sprintf("%T", old) {
				same = append(same, v)
			}
		}
		if len(same) > 0 {
			return same[r.IntN(len(same))]
		}
	}
	return interesting[r.IntN(len(interesting))]
}

// mutateBytes encodes objs, one document each, and mutates the bytes of one agent-sandbox
// document as Go's fuzzing engine does: delete a span, insert a token, copy a span elsewhere,
// replace a byte.
func mutateBytes(t *testing.T, r *rand.Rand, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	docs := make([][]byte, len(objs))
	var own []int
	for i, o := range objs {
		docs[i] = encodeAll(t, []*unstructured.Unstructured{o})
		if manifest.IsAgentSandbox(o) {
			own = append(own, i)
		}
	}
	if len(own) > 0 {
		i := own[r.IntN(len(own))]
		d := slices.Clone(docs[i])
		for range 1 + r.IntN(2) {
			if len(d) < 2 {
				break
			}
			pos := r.IntN(len(d))
			switch r.IntN(4) {
			case 0:
				d = slices.Delete(d, pos, min(len(d), pos+1+r.IntN(8)))
			case 1:
				tokens := []string{" ", "=", "-", "\n", ":", "'", "{}", "[]", "5", "A", ".", "/", "\"", "#"}
				d = slices.Insert(d, pos, []byte(tokens[r.IntN(len(tokens))])...)
			case 2:
				from := r.IntN(len(d))
				span := slices.Clone(d[from:min(len(d), from+1+r.IntN(16))])
				d = slices.Insert(d, pos, span...)
			case 3:
				d[pos] = byte(' ' + r.IntN(95))
			}
		}
		docs[i] = d
	}
	var out []byte
	for i, d := range docs {
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, d...)
	}
	return out
}
