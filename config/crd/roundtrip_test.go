package crd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// roundTrips are written the way users write them: defaults omitted. Each is created on a real
// API server, read back, and the stored spec must equal what manifest.Decode (the edge of every
// render) makes of the same YAML. If the server defaulted something render does not, or the other
// way round, this fails.
const roundTrips = `
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: sandbox-defaults
  namespace: default
spec:
  podTemplate:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: python
        image: python:3.12
        ports:
        - containerPort: 8888
        env:
        - name: FROM_SECRET
          valueFrom:
            secretKeyRef:
              name: api-token
              key: token
      imagePullSecrets:
      - {}
  volumeClaimTemplates:
  - metadata:
      name: workspace
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1024Mi
  service: true
  shutdownTime: "2030-01-01T00:00:00Z"
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: python-template
  namespace: default
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12
        ports:
        - containerPort: 8888
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: custom-policy
  namespace: default
spec:
  podTemplate:
    spec:
      containers:
      - name: agent
        image: agent:1
  networkPolicy:
    egress:
    - ports:
      - port: 443
  envVarsInjectionPolicy: Overrides
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata:
  name: python-pool
  namespace: default
spec:
  sandboxTemplateRef:
    name: python-template
  updateStrategy: {}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata:
  name: rolling-pool
  namespace: default
spec:
  sandboxTemplateRef:
    name: python-template
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 50%
      maxUnavailable: 0
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata:
  name: my-claim
  namespace: default
spec:
  warmPoolRef:
    name: python-pool
  lifecycle:
    ttlSecondsAfterFinished: 60
  env:
  - name: TASK
    value: hello
  - name: API_KEY
    valueFrom:
      secretKeyRef:
        name: anthropic
        key: api-key
`

func TestCRDRoundTripOnARealAPIServer(t *testing.T) {
	cfg, _ := testenv.StartAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	objs, err := manifest.Parse("roundtrip.yaml", []byte(roundTrips))
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := manifest.Decode(objs)
	if err != nil {
		t.Fatal(err)
	}
	wantSpecs := map[string]any{}
	add := func(kind, name string, obj runtime.Object) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		wantSpecs[kind+"/"+name] = m["spec"]
	}
	for _, o := range decoded.Sandboxes {
		add(o.Kind, o.Name, o)
	}
	for _, o := range decoded.Templates {
		add(o.Kind, o.Name, o)
	}
	for _, o := range decoded.Pools {
		add(o.Kind, o.Name, o)
	}
	for _, o := range decoded.Claims {
		add(o.Kind, o.Name, o)
	}
	if len(wantSpecs) != 6 {
		t.Fatalf("decoded %d objects, want 6", len(wantSpecs))
	}

	for _, o := range objs {
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		stored := storedSpec(t, got)
		if diff := cmp.Diff(wantSpecs[o.GetKind()+"/"+o.GetName()], stored); diff != "" {
			t.Errorf("%s %s: the API server stored a spec render does not assume (-render +server):\n%s", o.GetKind(), o.GetName(), diff)
		}
		if o.GetName() == "python-template" {
			back, err := manifest.Decode([]*unstructured.Unstructured{got})
			if err != nil {
				t.Fatal(err)
			}
			h, err := render.BlueprintHash(&back.Templates[0].Spec.SandboxBlueprint)
			if err != nil {
				t.Fatal(err)
			}
			if h != "e6830f96" {
				t.Errorf("blueprint hash of the template as stored = %s, want upstream's e6830f96", h)
			}
		}
	}

	// The claim's env rules are CEL in the CRD; the server and the render must refuse the same
	// entries.
	for name, entry := range map[string]map[string]any{
		"both":      {"name": "A", "value": "x", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}},
		"neither":   {"name": "A"},
		"no source": {"name": "A", "valueFrom": map[string]any{}},
	} {
		claim := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
			"metadata": map[string]any{"name": "env-" + strings.ReplaceAll(name, " ", "-"), "namespace": "default"},
			"spec":     map[string]any{"warmPoolRef": map[string]any{"name": "python-pool"}, "env": []any{entry}},
		}}
		_, decodeErr := manifest.Decode([]*unstructured.Unstructured{claim.DeepCopy()})
		err := c.Create(ctx, claim)
		if err == nil || !strings.Contains(err.Error(), "exactly one of") {
			t.Errorf("env %s: the API server accepted it or refused it for another reason: %v", name, err)
		}
		if decodeErr == nil || !strings.Contains(decodeErr.Error(), "exactly one of") {
			t.Errorf("env %s: the render accepted what the API server refuses: %v", name, decodeErr)
		}
	}

	// A RollingUpdate's bounds are checked by the schema and by CEL rules in the CRD; the server
	// and the render (manifest.Decode runs render.ValidatePool for the CEL rules) must take and
	// refuse the same ones.
	for name, tc := range map[string]struct {
		strategy map[string]any
		refused  bool
	}{
		"over a hundred":       {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "150%"}}, true},
		"both 0":               {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": int64(0), "maxSurge": "00%"}}, true},
		"negative":             {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(-1)}}, true},
		"no percent sign":      {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25"}}, true},
		"a fraction":           {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "1.5%"}}, true},
		"ten digits":           {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "1000000000%"}}, true},
		"under Recreate":       {map[string]any{"type": "Recreate", "rollingUpdate": map[string]any{"maxSurge": int64(1)}}, true},
		"with no type":         {map[string]any{"rollingUpdate": map[string]any{"maxSurge": int64(1)}}, true},
		"all unavailable":      {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "100%", "maxSurge": int64(0)}}, false},
		"leading zeros":        {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "007%", "maxSurge": "0100%"}}, false},
		"nine digits":          {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "999999999%"}}, false},
		"zero percent":         {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "0%"}}, false},
		"surge 0 rest default": {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(0)}}, false},
		"no bounds":            {map[string]any{"type": "RollingUpdate"}, false},
	} {
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
			"metadata": map[string]any{"name": "bounds-" + strings.ToLower(strings.ReplaceAll(name, " ", "-")), "namespace": "default"},
			"spec":     map[string]any{"sandboxTemplateRef": map[string]any{"name": "python-template"}, "updateStrategy": tc.strategy},
		}}
		_, decodeErr := manifest.Decode([]*unstructured.Unstructured{pool.DeepCopy()})
		err := c.Create(ctx, pool)
		if err != nil && strings.Contains(err.Error(), "metadata.name") {
			t.Fatalf("bounds %s: the case's name is not a valid object name: %v", name, err)
		}
		if (err != nil) != tc.refused || (decodeErr != nil) != tc.refused {
			t.Errorf("bounds %s: the API server says %v, the render %v; want refused %v", name, err, decodeErr, tc.refused)
		}
	}

	// v1alpha1 is served through the controller's conversion webhook, which does not run here:
	// the server must refuse a v1alpha1 create rather than store a copy converted any other way
	// (webhook/ tests the conversion with the webhook running).
	alpha := &unstructured.Unstructured{}
	alpha.SetAPIVersion("agents.x-k8s.io/v1alpha1")
	alpha.SetKind("Sandbox")
	alpha.SetName("old")
	alpha.SetNamespace("default")
	_ = unstructured.SetNestedField(alpha.Object, map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a", "image": "a"}}}}, "spec", "podTemplate")
	err = c.Create(ctx, alpha)
	if err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Errorf("creating a v1alpha1 Sandbox with no webhook running: err = %v, want the conversion webhook to be named", err)
	}
	stored := &unstructured.Unstructured{}
	stored.SetAPIVersion("agents.x-k8s.io/v1beta1")
	stored.SetKind("Sandbox")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "old"}, stored); !apierrors.IsNotFound(err) {
		t.Errorf("the refused v1alpha1 Sandbox was stored anyway: %v", err)
	}
}

// storedSpec passes the stored object through its typed Go form, without defaulting anything,
// so that the comparison sees content (quantities canonicalised, numbers typed) and never
// re-applies render's defaults to what the server stored.
func storedSpec(t *testing.T, u *unstructured.Unstructured) any {
	t.Helper()
	var obj runtime.Object
	switch u.GetKind() {
	case "Sandbox":
		obj = &agentsv1beta1.Sandbox{}
	case "SandboxTemplate":
		obj = &extv1beta1.SandboxTemplate{}
	case "SandboxWarmPool":
		obj = &extv1beta1.SandboxWarmPool{}
	default:
		obj = &extv1beta1.SandboxClaim{}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		t.Fatalf("the stored %s does not decode: %v", u.GetKind(), err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m["spec"]
}
