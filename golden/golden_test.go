package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current render")

// renderFunc turns input objects into output bytes, or an error whose text is the golden.
type renderFunc func(objs []*unstructured.Unstructured) ([]byte, error)

// TestGolden runs every case of testdata/render (declarative expansion of manifests) and
// testdata/plan (one controller pass over Sandboxes and the children observed in the cluster).
func TestGolden(t *testing.T) {
	suites := []struct {
		dir        string
		idempotent bool
		fn         func(cfg CaseConfig) renderFunc
	}{
		{"testdata/render", true, expandFunc},
		{"testdata/plan", false, planFunc},
	}
	total := 0
	for _, s := range suites {
		dirs, err := os.ReadDir(s.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if !d.IsDir() {
				continue
			}
			total++
			dir := filepath.Join(s.dir, d.Name())
			t.Run(filepath.Base(s.dir)+"/"+d.Name(), func(t *testing.T) {
				runCase(t, dir, s.fn, s.idempotent)
			})
		}
	}
	// 25 cases came with the Sandbox render, 40 more with templates, claims and pools.
	if total < 65 {
		t.Errorf("only %d golden cases; the suite promises at least 65", total)
	}
}

func runCase(t *testing.T, dir string, mk func(CaseConfig) renderFunc, idempotent bool) {
	cfg, err := ReadCaseConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	fn := mk(cfg)
	objs := readInput(t, dir)

	got, err := fn(objs)
	expectedFile, errorsFile := filepath.Join(dir, "expected.yaml"), filepath.Join(dir, "errors.txt")
	if *update {
		os.Remove(expectedFile)
		os.Remove(errorsFile)
		if err != nil {
			writeFile(t, errorsFile, []byte(err.Error()+"\n"))
		} else {
			writeFile(t, expectedFile, got)
		}
	}
	wantErr := strings.HasPrefix(filepath.Base(dir), "err-")
	if wantErr != (err != nil) {
		t.Fatalf("case %s: render error = %v; cases named err-* must fail and only they", filepath.Base(dir), err)
	}
	if err != nil {
		want, rerr := os.ReadFile(errorsFile)
		if rerr != nil {
			t.Fatalf("render failed but the case has no errors.txt: %v", err)
		}
		if diff := cmp.Diff(string(want), err.Error()+"\n"); diff != "" {
			t.Errorf("errors (-want +got):\n%s", diff)
		}
		if _, serr := os.Stat(expectedFile); serr == nil {
			t.Errorf("render failed, yet the case has an expected.yaml")
		}
	} else {
		want, rerr := os.ReadFile(expectedFile)
		if rerr != nil {
			t.Fatalf("render succeeded but the case has no expected.yaml (run with -update): %v", rerr)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
	}

	if err := checkDeterministic(fn, objs); err != nil {
		t.Error(err)
	}
	if idempotent && err == nil {
		again, err := manifest.Parse("output", got)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkSame(fn, again, got, "its own output as input"); err != nil {
			t.Error(err)
		}
	}
}

// checkDeterministic renders objs twice, then in reverse and in several shuffled orders, and
// requires the same bytes (or the same error) every time.
func checkDeterministic(fn renderFunc, objs []*unstructured.Unstructured) error {
	want, wantErr := fn(deepCopy(objs))
	orders := map[string][]*unstructured.Unstructured{"the same order, again": deepCopy(objs)}
	rev := deepCopy(objs)
	slices.Reverse(rev)
	orders["reverse order"] = rev
	for seed := uint64(1); seed <= 3; seed++ {
		s := deepCopy(objs)
		r := rand.New(rand.NewPCG(seed, seed*7919))
		r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		orders[fmt.Sprintf("shuffled order (seed %d)", seed)] = s
	}
	names := make([]string, 0, len(orders))
	for n := range orders {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		got, gotErr := fn(orders[n])
		if errText(wantErr) != errText(gotErr) {
			return fmt.Errorf("rendering in %s changed the error:\n%s", n, cmp.Diff(errText(wantErr), errText(gotErr)))
		}
		if !bytes.Equal(want, got) {
			return fmt.Errorf("rendering in %s changed the output (-first +now):\n%s", n, cmp.Diff(string(want), string(got)))
		}
	}
	return nil
}

func checkSame(fn renderFunc, objs []*unstructured.Unstructured, want []byte, what string) error {
	got, err := fn(objs)
	if err != nil {
		return fmt.Errorf("rendering %s failed: %v", what, err)
	}
	if !bytes.Equal(want, got) {
		return fmt.Errorf("rendering %s changed it (-output +re-rendered):\n%s", what, cmp.Diff(string(want), string(got)))
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func deepCopy(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}

// readInput is ReadCaseInputs, failing the test on an error.
func readInput(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := ReadCaseInputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// expandFunc is the declarative render: the manifests plus their children.
func expandFunc(cfg CaseConfig) renderFunc {
	return func(objs []*unstructured.Unstructured) ([]byte, error) {
		out, err := bundle.Expand(objs, cfg.RenderOptions())
		if err != nil {
			return nil, err
		}
		if !cfg.KeepSourceVersions {
			if out, err = bundle.ConvertSources(out); err != nil {
				return nil, err
			}
		}
		return manifest.Encode(out)
	}
}

// planFunc is one controller pass per object of the input: for each Sandbox against the Pods,
// Services and PVCs of the input (what the controller observed); for each claim its expiry
// decision and status against the Sandboxes of the input (or, for claims named in config.yaml's
// adopt, the warm adoption); for each pool its status and stale members.
func planFunc(cfg CaseConfig) renderFunc {
	return func(objs []*unstructured.Unstructured) ([]byte, error) {
		if cfg.Now == nil {
			return nil, errors.New("plan cases need config.yaml with now")
		}
		opts := cfg.RenderOptions()
		var sources, observed []*unstructured.Unstructured
		for _, o := range objs {
			if manifest.IsAgentSandbox(o) {
				sources = append(sources, o)
			} else {
				observed = append(observed, o)
			}
		}
		b, err := manifest.Decode(sources)
		if err != nil {
			return nil, err
		}
		var plans []*unstructured.Unstructured
		add := func(kind, namespace, name string, plan any) error {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(plan)
			if err != nil {
				return err
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetAPIVersion("golden.sandbox-gitops.dev/v1alpha1")
			u.SetKind(kind)
			u.SetNamespace(namespace)
			u.SetName(name)
			plans = append(plans, u)
			return nil
		}
		for _, sb := range b.Sandboxes {
			obs := observe(sb, observed)
			plan := render.PlanSandbox(sb, obs, *cfg.Now, opts)
			// The controller caches only render.ObservedPod's part of a Pod: the plan must not
			// depend on the rest.
			part := obs
			part.Pods = nil
			for _, p := range obs.Pods {
				part.Pods = append(part.Pods, render.ObservedPod(p))
			}
			partPlan := render.PlanSandbox(sb, part, *cfg.Now, opts)
			if diff := cmp.Diff(plan, partPlan, cmpopts.IgnoreFields(render.SandboxPlan{}, "Pod"), cmpopts.IgnoreUnexported(render.SandboxPlan{})); diff != "" {
				return nil, fmt.Errorf("Sandbox %s: the plan differs on render.ObservedPod's part of its Pods (-whole +part):\n%s", sb.Name, diff)
			}
			refused := errors.New("refused")
			if diff := cmp.Diff(plan.FailedStatus(sb, refused, *cfg.Now, opts), partPlan.FailedStatus(sb, refused, *cfg.Now, opts)); diff != "" {
				return nil, fmt.Errorf("Sandbox %s: the status after a refused write differs on render.ObservedPod's part of its Pods (-whole +part):\n%s", sb.Name, diff)
			}
			if err := add("SandboxPlan", sb.Namespace, sb.Name, plan); err != nil {
				return nil, err
			}
		}
		for _, c := range b.Claims {
			plan := planClaim(c, b, cfg, opts)
			if err := add("ClaimPlan", c.Namespace, c.Name, &plan); err != nil {
				return nil, err
			}
		}
		for _, p := range b.Pools {
			plan := planPool(p, b, opts)
			if err := add("PoolPlan", p.Namespace, p.Name, &plan); err != nil {
				return nil, err
			}
		}
		manifest.SortCanonical(plans)
		return manifest.Encode(plans)
	}
}

func observe(sb *agentsv1beta1.Sandbox, observed []*unstructured.Unstructured) render.ObservedChildren {
	obs := render.ObservedChildren{}
	for _, o := range observed {
		if o.GetNamespace() != sb.Namespace {
			continue
		}
		switch o.GetKind() {
		case "Pod":
			p := &corev1.Pod{}
			mustConvert(o, p)
			obs.Pods = append(obs.Pods, p)
		case "Service":
			if o.GetName() == sb.Name {
				s := &corev1.Service{}
				mustConvert(o, s)
				obs.Service = s
			}
		case "PersistentVolumeClaim":
			p := &corev1.PersistentVolumeClaim{}
			mustConvert(o, p)
			obs.PVCs = append(obs.PVCs, p)
		}
	}
	// Observation order must not matter either.
	slices.SortFunc(obs.Pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return obs
}

// claimPlan is what the golden shows of a claim's pass.
type claimPlan struct {
	Expiry  render.ClaimExpiryDecision    `json:"expiry"`
	Adopted *agentsv1beta1.Sandbox        `json:"adopted,omitempty"`
	Status  extv1beta1.SandboxClaimStatus `json:"status"`
}

func planClaim(c *extv1beta1.SandboxClaim, b *manifest.Bundle, cfg CaseConfig, opts render.Options) claimPlan {
	plan := claimPlan{Expiry: render.ClaimExpiry(c, cfg.Now.Time)}
	cp := render.ResolveClaim(c, b.Pools, b.Templates)
	obs := render.ClaimObservation{Expired: plan.Expiry.Step != render.NotExpired}
	name := c.Status.SandboxStatus.Name
	if name == "" {
		name = c.Name
	}
	if warm, ok := cfg.Adopt[c.Name]; ok {
		name = warm
	}
	for _, sb := range b.Sandboxes {
		if sb.Namespace == c.Namespace && sb.Name == name {
			obs.Sandbox = sb
		}
	}
	switch {
	case cfg.Adopt[c.Name] != "" && obs.Sandbox != nil:
		adopted, err := render.AdoptWarmSandbox(obs.Sandbox, c, cp.Template)
		if err != nil {
			obs.Err = err
			obs.Sandbox = nil
			break
		}
		plan.Adopted = adopted
		obs.Sandbox = adopted
	case obs.Sandbox == nil && !obs.Expired:
		if _, err := render.ClaimSandbox(c, cp, opts); err != nil {
			obs.Err = err
		}
	}
	plan.Status = render.ClaimStatus(c, obs, *cfg.Now)
	return plan
}

// poolPlan is what the golden shows of a pool's pass.
type poolPlan struct {
	Status extv1beta1.SandboxWarmPoolStatus `json:"status"`
	// Stale lists the members that no longer match the template.
	Stale []string `json:"stale,omitempty"`
	// NewMembers are the names the next members would get.
	NewMembers []string `json:"newMembers,omitempty"`
}

func planPool(p *extv1beta1.SandboxWarmPool, b *manifest.Bundle, opts render.Options) poolPlan {
	var members []*agentsv1beta1.Sandbox
	taken := map[string]bool{}
	for _, sb := range b.Sandboxes {
		taken[sb.Name] = true
		if render.PoolMember(p, sb) {
			members = append(members, sb)
		}
	}
	slices.SortFunc(members, func(a, b *agentsv1beta1.Sandbox) int { return strings.Compare(a.Name, b.Name) })
	plan := poolPlan{Status: render.PoolStatus(p, members)}
	var t *extv1beta1.SandboxTemplate
	for _, c := range b.Templates {
		if c.Namespace == p.Namespace && c.Name == p.Spec.TemplateRef.Name {
			t = c
		}
	}
	if t != nil {
		hashes, err := render.TemplateHashes(t)
		if err != nil {
			panic(err)
		}
		for _, m := range members {
			if render.IsStale(m, t, hashes, opts) {
				plan.Stale = append(plan.Stale, m.Name)
			}
		}
	}
	if missing := int(render.Replicas(p)) - len(members); missing > 0 {
		plan.NewMembers = render.PoolMemberNames(p.Namespace, p.Name, missing, taken)
	}
	return plan
}

func mustConvert(u *unstructured.Unstructured, into any) {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		panic(err)
	}
}

// TestDeterminismCheckFailsOnOrderDependentRender proves the harness would catch a render whose
// output follows input order: checkDeterministic must reject it on a deliberately shuffled
// bundle, and accept the real render of the same bundle.
func TestDeterminismCheckFailsOnOrderDependentRender(t *testing.T) {
	objs := readInput(t, "testdata/render/many-sandboxes-shuffled")
	inInputOrder := func(objs []*unstructured.Unstructured) ([]byte, error) {
		return manifest.Encode(objs)
	}
	if err := checkDeterministic(inInputOrder, objs); err == nil {
		t.Fatal("an order-dependent render passed the determinism check")
	}
	if err := checkDeterministic(expandFunc(CaseConfig{}), objs); err != nil {
		t.Fatalf("the real render failed the determinism check: %v", err)
	}
}
