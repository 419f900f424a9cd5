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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/migrate"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/goldencase"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current render")

// renderFunc turns input objects into output bytes, or an error whose text is the golden.
type renderFunc func(objs []*unstructured.Unstructured) ([]byte, error)

// TestGolden runs every case of testdata/render (declarative expansion of manifests) and
// testdata/plan (one controller pass over Sandboxes and the children observed in the cluster).
// A render case's warnings (bundle.Expansion.Warnings, what the CLI and the function report
// beside a render that succeeds) are a golden too: warnings.txt, absent when there are none.
func TestGolden(t *testing.T) {
	suites := []struct {
		dir        string
		idempotent bool
		fn         func(cfg goldencase.Config) renderFunc
		warn       func(cfg goldencase.Config) renderFunc
	}{
		{"testdata/render", true, expandFunc, warningsFunc},
		{"testdata/plan", false, planFunc, nil},
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
				if s.warn != nil {
					runWarnings(t, dir, s.fn, s.warn)
				}
			})
		}
	}
	// 25 cases came with the Sandbox render, 40 more with templates, claims and pools.
	if total < 65 {
		t.Errorf("only %d golden cases; the suite promises at least 65", total)
	}
}

func runCase(t *testing.T, dir string, mk func(goldencase.Config) renderFunc, idempotent bool) {
	cfg, err := goldencase.ReadConfig(dir)
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

// runWarnings compares a case's warnings with warnings.txt (none: no file), and requires the same
// warnings in every input order, and the same NetworkPolicy warnings on the render's own output,
// which carries the templates unchanged (not so the expiry warnings: a Sandbox past its
// shutdownTime under shutdownPolicy Delete is not in the output). Cases whose render fails have
// none.
func runWarnings(t *testing.T, dir string, mk, warn func(goldencase.Config) renderFunc) {
	cfg, err := goldencase.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs := readInput(t, dir)
	out, err := mk(cfg)(deepCopy(objs))
	if err != nil {
		return
	}
	fn := warn(cfg)
	got, _ := fn(objs)
	warningsFile := filepath.Join(dir, "warnings.txt")
	if *update {
		os.Remove(warningsFile)
		if len(got) > 0 {
			writeFile(t, warningsFile, got)
		}
	}
	want, err := os.ReadFile(warningsFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if err := checkDeterministic(fn, objs); err != nil {
		t.Errorf("warnings: %v", err)
	}
	again, err := manifest.Parse("output", out)
	if err != nil {
		t.Fatal(err)
	}
	policy := func(objs []*unstructured.Unstructured) ([]byte, error) {
		var b bytes.Buffer
		x, err := bundle.ExpandEntries(objs, cfg.RenderOptions(), false)
		if err != nil {
			return nil, err
		}
		for _, w := range x.Warnings {
			if w.Kind == "SandboxTemplate" {
				b.WriteString(w.String() + "\n")
			}
		}
		return b.Bytes(), nil
	}
	want, _ = policy(objs)
	if err := checkSame(policy, again, want, "its own output as input"); err != nil {
		t.Errorf("NetworkPolicy warnings: %v", err)
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
	objs, err := goldencase.ReadInputs(dir)
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
func expandFunc(cfg goldencase.Config) renderFunc {
	return func(objs []*unstructured.Unstructured) ([]byte, error) {
		out, err := bundle.Expand(objs, cfg.RenderOptions())
		if err != nil {
			return nil, err
		}
		if !cfg.KeepSourceVersions {
			if out, err = migrate.Objects(out); err != nil {
				return nil, err
			}
		}
		return manifest.Encode(out)
	}
}

// warningsFunc is the render's warnings, one line each: what bundle.Expansion's warnings say of
// the input that renders (empty for none, and for input that does not render).
func warningsFunc(cfg goldencase.Config) renderFunc {
	return func(objs []*unstructured.Unstructured) ([]byte, error) {
		var b bytes.Buffer
		x, err := bundle.ExpandEntries(objs, cfg.RenderOptions(), false)
		if err != nil {
			return nil, nil
		}
		for _, w := range x.Warnings {
			b.WriteString(w.String() + "\n")
		}
		return b.Bytes(), nil
	}
}

// planFunc is one controller pass per object of the input, as render plans it for the
// controller: for each Sandbox (render.PlanSandbox) against the Pods, Services and PVCs of the
// input (what the controller observed); for each claim (render.PlanClaim) and each pool
// (render.PlanPool) against the agent-sandbox objects of the input.
func planFunc(cfg goldencase.Config) renderFunc {
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
			if diff := cmp.Diff(plan.Refused(refused), partPlan.Refused(refused)); diff != "" {
				return nil, fmt.Errorf("Sandbox %s: the status after a refused write differs on render.ObservedPod's part of its Pods (-whole +part):\n%s", sb.Name, diff)
			}
			if err := add("SandboxPlan", sb.Namespace, sb.Name, plan); err != nil {
				return nil, err
			}
		}
		for _, c := range b.Claims {
			plan, err := planClaim(c, b, cfg, opts)
			if err != nil {
				return nil, err
			}
			if err := add("ClaimPlan", c.Namespace, c.Name, &plan); err != nil {
				return nil, err
			}
		}
		for _, p := range b.Pools {
			if err := add("PoolPlan", p.Namespace, p.Name, planPool(p, b, observed, cfg, opts)); err != nil {
				return nil, err
			}
		}
		manifest.SortCanonical(plans)
		return manifest.Encode(plans)
	}
}

func observe(sb *agentsv1beta1.Sandbox, observed []*unstructured.Unstructured) render.SandboxFound {
	obs := render.SandboxFound{}
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

// claimPlan is what the golden shows of a claim's pass: render.PlanClaim's plan, and the
// Sandbox a warm adoption applies (step intents are not part of a plan's JSON).
type claimPlan struct {
	*render.ClaimPlan `json:",inline"`
	Adopted           *agentsv1beta1.Sandbox `json:"adopted,omitempty"`
}

// planClaim runs render.PlanClaim as the controller does, on what a controller would find in the
// input: the Sandbox the claim controls, its pool and template, the pool's members and claims
// (by the controller's indexes: the warm-pool label, spec.warmPoolRef) and the Sandbox under the
// claim's name when render.ClaimNameToRead asks for it, and the members' arrival order when
// config.yaml gives one. A claim named in config.yaml's adopt must adopt that member.
func planClaim(c *extv1beta1.SandboxClaim, b *manifest.Bundle, cfg goldencase.Config, opts render.Options) (claimPlan, error) {
	found := render.ClaimFound{Pool: render.ResolveClaim(c, b.Pools, b.Templates)}
	if len(cfg.Arrival) > 0 {
		found.Arrival = map[string]uint64{}
		for i, name := range cfg.Arrival {
			found.Arrival[name] = uint64(i)
		}
	}
	for _, sb := range b.Sandboxes {
		if sb.Namespace != c.Namespace {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(sb); ref != nil && ref.UID == c.UID && c.UID != "" && sb.DeletionTimestamp == nil {
			found.Sandbox = sb
		}
		if p := found.Pool.Pool; p != nil && sb.Labels[agentsv1beta1.SandboxWarmPoolLabel] == render.NameHash(p.Name) {
			found.Members = append(found.Members, sb)
		}
	}
	if p := found.Pool.Pool; p != nil {
		for _, other := range b.Claims {
			if other.Namespace == c.Namespace && other.Spec.WarmPoolRef.Name == p.Name {
				found.Claims = append(found.Claims, other)
			}
		}
	}
	if name, read := render.ClaimNameToRead(c, found, cfg.Now.Time); read {
		for _, sb := range b.Sandboxes {
			if sb.Namespace == c.Namespace && sb.Name == name {
				found.Named = sb
			}
		}
	}
	plan := claimPlan{ClaimPlan: render.PlanClaim(c, found, cfg.Now.Time, opts)}
	// A create of a name the input already holds is refused by the API server; the controller
	// then reads that object and plans again with it (render.ConflictReplan), as here.
	for replans := 0; replans < 3; replans++ {
		held := inTheWay(plan.Steps, b.Sandboxes, c.Namespace)
		if held == nil {
			break
		}
		found.Saw(held.step, held.sb)
		plan.ClaimPlan = render.PlanClaim(c, found, cfg.Now.Time, opts)
	}
	for _, s := range plan.Steps {
		if s.Action == render.ActionAdopt {
			plan.Adopted = s.Intent.Object.(*agentsv1beta1.Sandbox)
		}
	}
	if want, ok := cfg.Adopt[c.Name]; ok && (plan.Adopted == nil || plan.Adopted.Name != want) {
		return plan, fmt.Errorf("claim %s: config.yaml says it adopts %q; the plan's steps are %v", c.Name, want, plan.Steps)
	}
	return plan, nil
}

// heldName is a create-only step and the Sandbox of the input that holds its name.
type heldName struct {
	step render.Step
	sb   *agentsv1beta1.Sandbox
}

// inTheWay is the first create-only step of steps whose name a Sandbox of the input holds.
func inTheWay(steps []render.Step, sandboxes []*agentsv1beta1.Sandbox, ns string) *heldName {
	for _, s := range steps {
		if s.Precondition == nil || !s.Precondition.CreateOnly {
			continue
		}
		for _, sb := range sandboxes {
			if sb.Namespace == ns && sb.Name == s.Name {
				return &heldName{s, sb}
			}
		}
	}
	return nil
}

// planPool runs render.PlanPool as the controller does, on what a controller would find in the
// input: the pool's template, the Sandboxes carrying its warm-pool label, and the names taken
// (every Sandbox's and every Pod's of the namespace).
func planPool(p *extv1beta1.SandboxWarmPool, b *manifest.Bundle, observed []*unstructured.Unstructured, cfg goldencase.Config, opts render.Options) *render.PoolPlan {
	found := render.PoolFound{Taken: map[string]bool{}}
	for _, sb := range b.Sandboxes {
		if sb.Namespace != p.Namespace {
			continue
		}
		found.Taken[sb.Name] = true
		if sb.Labels[agentsv1beta1.SandboxWarmPoolLabel] == render.NameHash(p.Name) {
			found.Sandboxes = append(found.Sandboxes, sb)
		}
	}
	for _, o := range observed {
		if o.GetKind() == "Pod" && o.GetNamespace() == p.Namespace {
			found.Taken[o.GetName()] = true
		}
	}
	for _, t := range b.Templates {
		if t.Namespace == p.Namespace && t.Name == p.Spec.TemplateRef.Name {
			found.Template = t
		}
	}
	return render.PlanPool(p, found, cfg.Now.Time, opts)
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
	if err := checkDeterministic(expandFunc(goldencase.Config{}), objs); err != nil {
		t.Fatalf("the real render failed the determinism check: %v", err)
	}
}
