package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/internal/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/policies"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// previewCase is a golden render case the controller can run: valid, and made only of v1beta1
// objects without UIDs. A claim the controller would satisfy from a warm pool is left out: the
// render always shows the cold path (see the README's deviations), so a case qualifies only when
// every claim starts cold (env or volume claim templates, or a pool of 0).
type previewCase struct {
	name   string
	inputs []*unstructured.Unstructured
	opts   render.Options
	ns     string
}

// goldenConfig is the part of a golden case's config.yaml that sets render options.
type goldenConfig struct {
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// Now is the moment a case previews; here the preview is taken at the real time instead,
	// which is the moment the controller acts.
	Now     *metav1.Time `json:"now,omitempty"`
	Options *struct {
		Policies                policies.Config `json:"policies,omitempty"`
		AllowedLabelDomains     []string        `json:"allowedLabelDomains,omitempty"`
		DisableWarmPoolEviction bool            `json:"disableWarmPoolEviction,omitempty"`
	} `json:"options,omitempty"`
}

func previewCases(t *testing.T) []*previewCase {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "golden", "testdata", "render", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*previewCase
	for _, dir := range dirs {
		name := filepath.Base(dir)
		if strings.HasPrefix(name, "err-") {
			continue
		}
		c := &previewCase{name: name}
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		usable := true
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			switch filepath.Base(f) {
			case "expected.yaml":
				continue
			case "config.yaml":
				var cfg goldenConfig
				if err := yaml.Unmarshal(b, &cfg); err != nil { // the golden harness checks the rest
					t.Fatalf("%s: %v", f, err)
				}
				if cfg.Now != nil {
					// A preview of a fixed moment: its Sandboxes expire before the controller
					// first sees them, and a controller never creates the children of a
					// Sandbox that is born expired, while the preview keeps a Retain
					// Sandbox's PVCs (so a GitOps tool never prunes data). TestExpiry covers
					// expiry in the cluster.
					usable = false
				}
				c.opts.ClusterDomain = cfg.ClusterDomain
				if cfg.Options != nil {
					c.opts.Policies = cfg.Options.Policies
					c.opts.AllowedLabelDomains = cfg.Options.AllowedLabelDomains
				}
				continue
			}
			objs, err := manifest.Parse(filepath.Base(f), b)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				switch o.GroupVersionKind() {
				case agentsv1beta1.GroupVersion.WithKind(agentsv1beta1.SandboxKind), extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxTemplateKind),
					extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxWarmPoolKind), extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxClaimKind):
				default:
					usable = false
				}
				if o.GetUID() != "" {
					// A UID is the API server's to give.
					usable = false
				}
			}
			c.inputs = append(c.inputs, objs...)
		}
		if usable && len(c.inputs) > 0 && claimsStartCold(c.inputs) {
			out = append(out, c)
		}
	}
	return out
}

// claimsStartCold reports whether every claim among the inputs starts cold in the cluster: it
// has env or volume claim templates, or its pool (among the inputs) has no members.
func claimsStartCold(inputs []*unstructured.Unstructured) bool {
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
	for _, o := range inputs {
		if o.GetKind() != extv1beta1.SandboxClaimKind {
			continue
		}
		env, _, _ := unstructured.NestedSlice(o.Object, "spec", "env")
		vcts, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
		pool, _, _ := unstructured.NestedString(o.Object, "spec", "warmPoolRef", "name")
		if len(env) == 0 && len(vcts) == 0 && replicas[pool] != 0 {
			return false
		}
	}
	return true
}

// TestPreviewEqualsReality is the project's promise: for every golden render case of Sandboxes,
// templates, pools and (cold) claims, what the render previews (the function's and `sandbox-render render`'s code:
// bundle.Expand) is what the controller creates, field for field after API defaults; owner
// references excepted (a preview has no UIDs). Cases sharing render options share a controller.
func TestPreviewEqualsReality(t *testing.T) {
	cases := previewCases(t)
	if len(cases) < 15 {
		t.Fatalf("only %d golden cases qualify; the filter is broken", len(cases))
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
		k, _ := json.Marshal(c.opts)
		groups[string(k)] = append(groups[string(k)], c)
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
		opts := controller.Options{Render: group[0].opts}
		stop := startControllerIn(t, namespaces, opts)
		now := time.Now()
		rejected := map[string]error{}
		for _, c := range group {
			for _, o := range c.inputs {
				o = o.DeepCopy()
				o.SetNamespace(c.ns)
				if err := admin.Create(context.Background(), o); err != nil {
					rejected[c.name] = fmt.Errorf("the render accepts %s %s, the API server does not: %w", o.GetKind(), o.GetName(), err)
				}
			}
		}
		for _, c := range group {
			t.Run(c.name, func(t *testing.T) {
				if err := rejected[c.name]; err != nil {
					t.Fatal(err)
				}
				checkPreview(t, c, now)
			})
			ran++
		}
		stop()
	}
	t.Logf("%d golden cases compared with the cluster", ran)
}

func checkPreview(t *testing.T, c *previewCase, now time.Time) {
	var inputs []*unstructured.Unstructured
	for _, o := range c.inputs {
		o = o.DeepCopy()
		o.SetNamespace(c.ns)
		inputs = append(inputs, o)
	}
	opts := c.opts
	opts.Now = &now
	preview, err := bundle.Expand(inputs, opts)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	inputSandboxes := map[string]bool{}
	for _, o := range inputs {
		if o.GetKind() == agentsv1beta1.SandboxKind {
			inputSandboxes[o.GetName()] = true
		}
	}
	want := map[string]*unstructured.Unstructured{}
	for _, o := range preview {
		switch o.GetKind() {
		case extv1beta1.SandboxTemplateKind, extv1beta1.SandboxWarmPoolKind, extv1beta1.SandboxClaimKind:
			continue
		case agentsv1beta1.SandboxKind:
			// The user's own Sandboxes pass through; the ones made from pools and claims are
			// the controller's to create.
			if inputSandboxes[o.GetName()] {
				continue
			}
		}
		want[o.GetKind()+"/"+o.GetName()] = o
	}
	eventually(t, 30*time.Second, "the cluster matches the preview", func() error {
		var problems []string
		for key, w := range want {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(w.GroupVersionKind())
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(w), live); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", key, err))
				continue
			}
			wc := w.DeepCopy()
			unstructured.RemoveNestedField(wc.Object, "metadata", "ownerReferences")
			problems = append(problems, subsetDiff(key, wc.Object, live.Object)...)
		}
		// Nothing the preview lacks: every child the controller applied is in it.
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
				if appliedBy(&o, controller.FieldManager) && want[o.GetKind()+"/"+o.GetName()] == nil {
					problems = append(problems, fmt.Sprintf("%s/%s: in the cluster but not in the preview", o.GetKind(), o.GetName()))
				}
			}
		}
		if len(problems) > 0 {
			sort.Strings(problems)
			return fmt.Errorf("\n%s", strings.Join(problems, "\n"))
		}
		return nil
	})
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
