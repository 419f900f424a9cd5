package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/migrate"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/goldencase"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// previewCase is a golden render case the controller can run. Its inputs are created as the
// cluster stores them: v1alpha1 objects converted to v1beta1 (migrate.Objects, what the
// render writes for them; the webhook's tests cover the conversion through the API server), and
// an earlier render's children, which the render replaces, left out.
type previewCase struct {
	name   string
	inputs []*unstructured.Unstructured
	// opts are the case's render options, without the moment it previews (now).
	opts render.Options
	now  *time.Time
	ns   string
	// config is the case's functionConfig, when it has one: the cluster gets its copy in the
	// case's namespace, as the function writes it, and the controller renders from that.
	config *renderconfig.Config
}

// previewPartial are the golden render cases of which the cluster cannot show a part, with what
// is left out and why; everything else of every valid case is compared. A case whose part drops
// out for another reason, or stops dropping out, fails the test, so nothing leaves the
// comparison silently.
var previewPartial = map[string]string{
	"docs-quickstart-v1alpha1":       warmClaims("python-sandbox-claim"),
	"docs-quickstart-v1beta1":        warmClaims("python-sandbox-claim"),
	"np-cluster-dns":                 warmClaims("my-claim"),
	"pack-restricted-sets-defaults":  warmClaims("my-claim"),
	"pack-standalone-network-policy": warmClaims("my-claim"),
	"v1alpha1-kept-as-written":       warmClaims("python-sandbox-claim"),
}

// warmClaims is the reason claims are left out of a case: the render always shows a claim's cold
// path (see the README's deviations), while in the cluster a claim its pool's members satisfy
// adopts one of them; claim_test.go compares that adoption with render.AdoptWarmSandbox.
func warmClaims(names ...string) string {
	return fmt.Sprintf("claims %v left out: their pool has members to adopt", names)
}

func previewCases(t *testing.T) (cases []*previewCase, partial map[string]string) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "golden", "testdata", "render", "*"))
	if err != nil {
		t.Fatal(err)
	}
	partial = map[string]string{}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		if strings.HasPrefix(name, "err-") {
			continue
		}
		cfg, err := goldencase.ReadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := goldencase.ReadInputs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if objs, err = migrate.Objects(objs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := &previewCase{name: name, opts: cfg.RenderOptions()}
		c.now, c.opts.Now = c.opts.Now, nil
		if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
			if c.config, err = renderconfig.Parse(cfg.FunctionConfig()); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			// The functionConfig renders as the case's options do, or the comparison below
			// would hold the cluster to options it was not given.
			fo := c.config.Options()
			fo.Now = nil
			if diff := gocmp.Diff(c.opts, fo); diff != "" {
				t.Fatalf("%s: the functionConfig's options differ from the case's (-case +functionConfig):\n%s", name, diff)
			}
		}
		for _, o := range objs {
			if !manifest.IsAgentSandbox(o) && o.GetLabels()[agentsv1beta1.SandboxNameHashLabel] != "" {
				continue // an earlier render's child: the render replaces it
			}
			c.inputs = append(c.inputs, o)
		}
		if warm := warmClaimsOf(c.inputs); len(warm) > 0 {
			partial[name] = warmClaims(warm...)
			c.inputs = slices.DeleteFunc(c.inputs, func(o *unstructured.Unstructured) bool {
				return o.GetKind() == extv1beta1.SandboxClaimKind && slices.Contains(warm, o.GetName())
			})
		}
		cases = append(cases, c)
	}
	return cases, partial
}

// warmClaimsOf names the claims among the inputs that a warm pool member satisfies in the
// cluster: no env, no volume claim templates, and a pool (among the inputs) with members.
func warmClaimsOf(inputs []*unstructured.Unstructured) []string {
	replicas := map[string]int64{}
	for _, o := range inputs {
		if o.GetKind() == extv1beta1.SandboxWarmPoolKind {
			n, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			if !found {
				n = 1
			}
			replicas[o.GetName()] = n
		}
	}
	var warm []string
	for _, o := range inputs {
		if o.GetKind() != extv1beta1.SandboxClaimKind {
			continue
		}
		env, _, _ := unstructured.NestedSlice(o.Object, "spec", "env")
		vcts, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
		pool, _, _ := unstructured.NestedString(o.Object, "spec", "warmPoolRef", "name")
		if len(env) == 0 && len(vcts) == 0 && replicas[pool] != 0 {
			warm = append(warm, o.GetName())
		}
	}
	return warm
}

// TestPreviewEqualsReality is the project's promise: for every valid golden render case (claims a
// warm pool satisfies left out, see previewPartial), what the render previews (the function's and
// `sandbox-render render`'s code: bundle.Expand) is what the controller creates, field for field
// after API defaults. Two previews are compared with the cluster. The one a pull request shows,
// rendered from the inputs as written (no UIDs), must be found in the cluster, owner references
// excepted. And rendered from the inputs with the UIDs the API server gave them, the preview
// must equal the cluster both ways: every field it sets is there with its value, owner
// references included, and every field the controller applied is in it. Cases sharing render
// options share a controller; a case that previews a moment (now) runs on the controller's
// clock, first a day before that moment and then at it, so its Sandboxes live and then expire
// as the preview shows.
func TestPreviewEqualsReality(t *testing.T) {
	cases, partial := previewCases(t)
	if diff := gocmp.Diff(previewPartial, partial); diff != "" {
		t.Errorf("parts of golden render cases left out of the comparison (-listed +found); list each with its reason:\n%s", diff)
	}
	groups := map[string][]*previewCase{}
	for _, c := range cases {
		// A cluster that runs the runtime-class pack has its RuntimeClasses; without them the
		// API server refuses the Pods.
		if rc := c.opts.Policies.Packs.RuntimeClass; rc != nil {
			for _, name := range rc.Allowed {
				err := admin.Create(context.Background(), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: name})
				if client.IgnoreAlreadyExists(err) != nil {
					t.Fatal(err)
				}
			}
		}
		// One controller, at its defaults, renders every namespace with that namespace's
		// SandboxRender; a case that previews a moment has its own, on its own clock.
		k := ""
		if c.now != nil {
			k = c.name
		}
		groups[k] = append(groups[k], c)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ran := 0
	for _, k := range keys {
		group := groups[k]
		var namespaces []string
		for _, c := range group {
			c.ns = newNamespace(t)
			namespaces = append(namespaces, c.ns)
		}
		for _, c := range group {
			if c.config == nil {
				continue
			}
			// As the function writes it into the tree's output, and the applier applies it.
			if err := admin.Create(context.Background(), c.config.Copies([]string{c.ns})[0]); err != nil {
				t.Fatalf("%s: the SandboxRender the function writes: %v", c.name, err)
			}
		}
		opts := controller.Options{}
		var moment time.Time
		if now := group[0].now; now != nil {
			// The day before: the Sandboxes are created and live.
			moment = now.Add(-24 * time.Hour)
			opts.Now = func() time.Time { return moment }
		}
		stop := startControllerIn(t, namespaces, opts)
		rejected := map[string]error{}
		created := map[string][]*unstructured.Unstructured{}
		for _, c := range group {
			var err error
			if created[c.name], err = createInputs(c.ns, c.inputs); err != nil {
				rejected[c.name] = err
			}
		}
		if !moment.IsZero() {
			c := group[0]
			t.Run(c.name+"/day-before", func(t *testing.T) {
				if err := rejected[c.name]; err != nil {
					t.Fatal(err)
				}
				checkPreview(t, c, created[c.name], moment)
			})
			// The moment itself: a controller whose clock says so takes over.
			stop()
			moment = *c.now
			stop = startControllerIn(t, namespaces, opts)
		}
		for _, c := range group {
			t.Run(c.name, func(t *testing.T) {
				if err := rejected[c.name]; err != nil {
					t.Fatal(err)
				}
				at := time.Now()
				if !moment.IsZero() {
					at = moment
				}
				checkPreview(t, c, created[c.name], at)
			})
			ran++
		}
		stop()
	}
	t.Logf("%d golden render cases compared with the cluster, %d of them without their warm claims", ran, len(partial))
}

// createInputs creates a case's inputs in namespace ns, in order, and returns them as the render
// sees the cluster's copies: as written, with the UID the API server gave each (a UID is the API
// server's to give; owner references to another input follow it).
func createInputs(ns string, inputs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	uids := map[types.UID]types.UID{}
	var out []*unstructured.Unstructured
	for _, in := range inputs {
		o := in.DeepCopy()
		o.SetNamespace(ns)
		o.SetUID("")
		refs := o.GetOwnerReferences()
		for i := range refs {
			if uid, ok := uids[refs[i].UID]; ok {
				refs[i].UID = uid
			}
		}
		o.SetOwnerReferences(refs)
		seen := o.DeepCopy()
		if err := admin.Create(context.Background(), o); err != nil {
			return nil, fmt.Errorf("the render accepts %s %s, the API server does not: %w", o.GetKind(), o.GetName(), err)
		}
		if old := in.GetUID(); old != "" {
			uids[old] = o.GetUID()
		}
		seen.SetUID(o.GetUID())
		out = append(out, seen)
	}
	return out, nil
}

// checkPreview compares the cluster with the case's previews at now (see TestPreviewEqualsReality);
// created are the inputs as the cluster has them.
func checkPreview(t *testing.T, c *previewCase, created []*unstructured.Unstructured, now time.Time) {
	t.Helper()
	var written []*unstructured.Unstructured
	for _, o := range c.inputs {
		o = o.DeepCopy()
		o.SetNamespace(c.ns)
		o.SetUID("") // as a pull request shows it: the cluster gave the UIDs the case invents
		written = append(written, o)
	}
	opts := c.opts
	opts.Now = &now
	asWritten, _ := expectedChildren(t, written, opts)
	asCreated, kept := expectedChildren(t, created, opts)
	inputSandboxes := map[string]bool{}
	for _, o := range created {
		if o.GetKind() == agentsv1beta1.SandboxKind {
			inputSandboxes[o.GetName()] = true
		}
	}
	eventually(t, time.Minute, "the cluster matches the preview", func() error {
		var problems []string
		for key, w := range asCreated {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(w.GroupVersionKind())
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(w), live); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", key, err))
				continue
			}
			problems = append(problems, subsetDiff(key, w.Object, live.Object)...)
			asPR := asWritten[key]
			if asPR == nil {
				problems = append(problems, fmt.Sprintf("%s: in the preview of the inputs with their UIDs, not in the one a pull request shows", key))
				continue
			}
			asPR = asPR.DeepCopy()
			unstructured.RemoveNestedField(asPR.Object, "metadata", "ownerReferences")
			problems = append(problems, subsetDiff("as written: "+key, asPR.Object, live.Object)...)
		}
		for key := range asWritten {
			if asCreated[key] == nil {
				problems = append(problems, fmt.Sprintf("%s: in the preview a pull request shows, not in the one of the inputs with their UIDs", key))
			}
		}
		// Nothing the preview lacks: every child the controller applied, and every field it
		// applied to it, is in the preview.
		for _, gvk := range []schema.GroupVersionKind{
			{Version: "v1", Kind: "PodList"}, {Version: "v1", Kind: "ServiceList"},
			{Version: "v1", Kind: "PersistentVolumeClaimList"}, {Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicyList"},
			agentsv1beta1.GroupVersion.WithKind("SandboxList"),
		} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk)
			if err := admin.List(context.Background(), list, client.InNamespace(c.ns)); err != nil {
				return err
			}
			for _, o := range list.Items {
				key := o.GetKind() + "/" + o.GetName()
				if o.GetKind() == agentsv1beta1.SandboxKind && inputSandboxes[o.GetName()] {
					if !kept[o.GetName()] && o.GetDeletionTimestamp() == nil {
						problems = append(problems, fmt.Sprintf("%s: in the cluster, gone from the preview", key))
					}
					continue
				}
				w := asCreated[key]
				if w == nil {
					if appliedBy(&o, controller.FieldManager) {
						problems = append(problems, fmt.Sprintf("%s: in the cluster but not in the preview", key))
					}
					continue
				}
				problems = append(problems, ownedNotInPreview(key, &o, w, madeSandboxUIDs(asCreated))...)
			}
		}
		if len(problems) > 0 {
			sort.Strings(problems)
			return fmt.Errorf("\n%s", strings.Join(problems, "\n"))
		}
		return nil
	})
}

// expectedChildren renders inputs and returns what the controller is to make of them, by
// "Kind/name": the children, and the Sandboxes made from pools and claims (templates, pools,
// claims, the user's own Sandboxes and anything else among the inputs pass through). kept are
// the input Sandboxes the preview still has (one expired under shutdownPolicy Delete is gone).
func expectedChildren(t *testing.T, inputs []*unstructured.Unstructured, opts render.Options) (want map[string]*unstructured.Unstructured, kept map[string]bool) {
	t.Helper()
	preview, err := bundle.Expand(inputs, opts)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	isInput := map[string]bool{}
	for _, o := range inputs {
		isInput[o.GetKind()+"/"+o.GetName()] = true
	}
	want, kept = map[string]*unstructured.Unstructured{}, map[string]bool{}
	for _, o := range preview {
		key := o.GetKind() + "/" + o.GetName()
		switch {
		case isInput[key] && o.GetKind() == agentsv1beta1.SandboxKind:
			kept[o.GetName()] = true
		case !isInput[key]:
			want[key] = o
		}
	}
	return want, kept
}

// madeSandboxUIDs are the UIDs the cluster gave the Sandboxes the controller made from pools and
// claims (among want), which no preview can know: their children's owner references name them.
func madeSandboxUIDs(want map[string]*unstructured.Unstructured) map[types.UID]bool {
	uids := map[types.UID]bool{}
	for _, w := range want {
		if w.GetKind() != agentsv1beta1.SandboxKind {
			continue
		}
		live := &agentsv1beta1.Sandbox{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(w), live); err == nil {
			uids[live.UID] = true
		}
	}
	return uids
}

// ownedNotInPreview lists the fields controller.FieldManager applied to live (its Apply entry in
// managedFields) that the preview w does not set; an owner reference to a Sandbox the controller
// made (madeUIDs) is the one field a preview cannot show.
func ownedNotInPreview(key string, live, w *unstructured.Unstructured, madeUIDs map[types.UID]bool) []string {
	ownedByMade := false
	for _, ref := range live.GetOwnerReferences() {
		ownedByMade = ownedByMade || ref.Kind == agentsv1beta1.SandboxKind && madeUIDs[ref.UID]
	}
	if ownedByMade && len(w.GetOwnerReferences()) == 0 {
		w = w.DeepCopy()
		w.SetOwnerReferences(live.GetOwnerReferences())
	}
	var out []string
	for _, e := range live.GetManagedFields() {
		if e.Manager != controller.FieldManager || e.Operation != metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return []string{fmt.Sprintf("%s: reading its managedFields: %v", key, err)}
		}
		set.Leaves().Iterate(func(p fieldpath.Path) {
			if !pathIn(w.Object, p) {
				out = append(out, fmt.Sprintf("%s: the controller applied %s, the preview does not set it", key, p))
			}
		})
	}
	return out
}

// pathIn reports whether the object v (JSON) has a value at the managed-fields path p. A list
// item is found by its key fields; a key field the preview leaves to the API server's defaults
// (a port's protocol) matches whatever the server filled in.
func pathIn(v any, p fieldpath.Path) bool {
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := v.(map[string]any)
			if !ok {
				return false
			}
			if v, ok = m[*pe.FieldName]; !ok {
				return false
			}
		case pe.Key != nil:
			var found bool
			if v, found = findItem(v, func(item any) bool {
				m, ok := item.(map[string]any)
				for _, f := range *pe.Key {
					if have, set := m[f.Name]; ok && set && !value.Equals(value.NewValueInterface(have), f.Value) {
						return false
					}
				}
				return ok
			}); !found {
				return false
			}
		case pe.Value != nil:
			var found bool
			if v, found = findItem(v, func(item any) bool { return value.Equals(value.NewValueInterface(item), *pe.Value) }); !found {
				return false
			}
		case pe.Index != nil:
			items, _ := v.([]any)
			if *pe.Index >= len(items) {
				return false
			}
			v = items[*pe.Index]
		}
	}
	return true
}

// findItem is the first item of the list v that match accepts.
func findItem(v any, match func(item any) bool) (any, bool) {
	items, _ := v.([]any)
	for _, item := range items {
		if match(item) {
			return item, true
		}
	}
	return nil, false
}

// subsetDiff lists the fields of want that have should not be missing or different in have.
func subsetDiff(path string, want, have any) []string {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, cluster has %v", path, have)}
		}
		var out []string
		for k, v := range w {
			if k == "creationTimestamp" || k == "status" && path == "" {
				continue
			}
			out = append(out, subsetDiff(path+"."+k, v, h[k])...)
		}
		return out
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return []string{fmt.Sprintf("%s: want %d items %v, cluster has %v", path, len(w), w, have)}
		}
		var out []string
		for i := range w {
			out = append(out, subsetDiff(fmt.Sprintf("%s[%d]", path, i), w[i], h[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(jsonValue(want), jsonValue(have)) {
		return []string{fmt.Sprintf("%s: preview %v, cluster %v", path, want, have)}
	}
	return nil
}

// jsonValue makes numbers comparable whatever their Go type.
func jsonValue(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
