package flux

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*/*.expected.yaml from the expressions")

const (
	snippetFile = "health-check-exprs.yaml"
	// fixtureDir holds the objects shared with the Argo CD checks, and their Argo CD goldens.
	fixtureDir = "../argocd/testdata"
)

// kstatus results a custom health check can produce (fluxcd/cli-utils kstatus/status).
const (
	current    = "Current"
	inProgress = "InProgress"
	failed     = "Failed"
	// unknown is what kstatus reports when evaluating the expressions returns an error.
	unknown = "Unknown"
)

// customHealthCheck is one entry of a Kustomization's spec.healthCheckExprs
// (fluxcd/pkg apis/kustomize CustomHealthCheck).
type customHealthCheck struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

type snippet struct {
	HealthCheckExprs []customHealthCheck `json:"healthCheckExprs"`
}

// kinds are the agent-sandbox kinds the snippet must cover, by fixture directory.
var kinds = map[string]schema.GroupKind{
	"sandbox":         {Group: "agents.x-k8s.io", Kind: "Sandbox"},
	"sandboxclaim":    {Group: "extensions.agents.x-k8s.io", Kind: "SandboxClaim"},
	"sandboxwarmpool": {Group: "extensions.agents.x-k8s.io", Kind: "SandboxWarmPool"},
}

func readSnippet(t *testing.T) snippet {
	t.Helper()
	data, err := os.ReadFile(snippetFile)
	if err != nil {
		t.Fatal(err)
	}
	var s snippet
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		t.Fatalf("%s: %v", snippetFile, err)
	}
	return s
}

// fluxEnv is the CEL environment fluxcd/pkg runtime/cel NewExpression builds for health
// checks: no declared variables (the expressions are parsed, not type-checked, because not every
// custom resource has the usual top-level fields), optional types, and the strings, sets and
// encoders extensions. The object's top-level fields are bound as variables at evaluation, so
// the expressions say status.conditions, not self.status.conditions.
func fluxEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
}

// evaluator is one entry of the snippet, parsed into programs as Flux's StatusEvaluator does.
type evaluator struct {
	current, inProgress, failed cel.Program
}

func newEvaluator(env *cel.Env, hc customHealthCheck) (*evaluator, error) {
	if hc.Current == "" {
		return nil, errors.New("current is required")
	}
	var e evaluator
	for _, x := range []struct {
		expr string
		dst  *cel.Program
	}{
		{hc.Current, &e.current},
		{hc.InProgress, &e.inProgress},
		{hc.Failed, &e.failed},
	} {
		if x.expr == "" {
			continue
		}
		ast, iss := env.Parse(x.expr)
		if iss.Err() != nil {
			return nil, fmt.Errorf("parse %q: %w", x.expr, iss.Err())
		}
		prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
		if err != nil {
			return nil, fmt.Errorf("program %q: %w", x.expr, err)
		}
		*x.dst = prg
	}
	return &e, nil
}

// evaluate returns the kstatus result Flux computes for obj (StatusEvaluator.Evaluate, RFC 0009):
// a status.observedGeneration that differs from metadata.generation is InProgress outright;
// otherwise inProgress, failed and current are evaluated in that order and the first true one
// wins; none true is InProgress. An evaluation error is Unknown, as kstatus reports it.
func (e *evaluator) evaluate(obj *unstructured.Unstructured) (string, error) {
	observed, ok, err := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if err == nil && ok {
		generation, ok, err := unstructured.NestedInt64(obj.Object, "metadata", "generation")
		if err == nil && ok && observed != generation {
			return inProgress, nil
		}
	}
	for _, x := range []struct {
		prg    cel.Program
		result string
	}{
		{e.inProgress, inProgress},
		{e.failed, failed},
		{e.current, current},
	} {
		if x.prg == nil {
			continue
		}
		val, _, err := x.prg.ContextEval(context.Background(), obj.Object)
		if err != nil {
			return unknown, err
		}
		b, ok := val.(types.Bool)
		if !ok {
			return unknown, fmt.Errorf("expression returned %s, want bool", val.Type())
		}
		if b {
			return x.result, nil
		}
	}
	return inProgress, nil
}

// TestSnippet checks the snippet has one well-formed entry per kind, and that every expression
// also type-checks as a bool in an environment that declares the usual top-level fields: Flux
// only parses, so a typo such as a misspelled macro would otherwise surface in the cluster.
func TestSnippet(t *testing.T) {
	s := readSnippet(t)
	var got []schema.GroupKind
	for _, hc := range s.HealthCheckExprs {
		gv, err := schema.ParseGroupVersion(hc.APIVersion)
		if err != nil {
			t.Fatalf("apiVersion %q: %v", hc.APIVersion, err)
		}
		if gv.Version != "v1beta1" {
			t.Errorf("%s: apiVersion %q, want v1beta1 (Flux matches on the group only, v1beta1 is what the project speaks)", hc.Kind, hc.APIVersion)
		}
		got = append(got, schema.GroupKind{Group: gv.Group, Kind: hc.Kind})
	}
	var want []schema.GroupKind
	for _, gk := range kinds {
		want = append(want, gk)
	}
	less := func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(got, less)
	slices.SortFunc(want, less)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds in %s: -want +got:\n%s", snippetFile, diff)
	}

	typed, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		cel.Variable("apiVersion", cel.StringType),
		cel.Variable("kind", cel.StringType),
		cel.Variable("metadata", cel.DynType),
		cel.Variable("spec", cel.DynType),
		cel.Variable("status", cel.DynType),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, hc := range s.HealthCheckExprs {
		for name, expr := range map[string]string{"current": hc.Current, "inProgress": hc.InProgress, "failed": hc.Failed} {
			if expr == "" {
				continue
			}
			ast, iss := typed.Compile(expr)
			if iss.Err() != nil {
				t.Errorf("%s %s: %v", hc.Kind, name, iss.Err())
				continue
			}
			if !ast.OutputType().IsExactType(cel.BoolType) {
				t.Errorf("%s %s: type %s, want bool", hc.Kind, name, ast.OutputType())
			}
		}
	}
}

type expected struct {
	Status string `json:"status"`
}

// argoToFlux is the correspondence the two checks promise: Healthy and Suspended are states
// nothing more happens in without a change in Git (Current), Degraded needs a fix (Failed).
var argoToFlux = map[string]string{
	"Healthy":     current,
	"Suspended":   current,
	"Degraded":    failed,
	"Progressing": inProgress,
}

// TestHealth evaluates the snippet against every object the Argo CD checks are tested with,
// compares with testdata/<kind>/<case>.expected.yaml (-update rewrites them), and checks the
// result agrees with the Argo CD golden for the same object.
func TestHealth(t *testing.T) {
	env, err := fluxEnv()
	if err != nil {
		t.Fatal(err)
	}
	evaluators := map[schema.GroupKind]*evaluator{}
	for _, hc := range readSnippet(t).HealthCheckExprs {
		gk := schema.FromAPIVersionAndKind(hc.APIVersion, hc.Kind).GroupKind()
		e, err := newEvaluator(env, hc)
		if err != nil {
			t.Fatalf("%s: %v", gk, err)
		}
		evaluators[gk] = e
	}

	for dir, gk := range kinds {
		fixtures := fixtures(t, dir)
		checkNoStrayGoldens(t, dir, fixtures)
		for _, fixture := range fixtures {
			name := strings.TrimSuffix(filepath.Base(fixture), ".yaml")
			golden := filepath.Join("testdata", dir, name+".expected.yaml")
			t.Run(dir+"/"+name, func(t *testing.T) {
				obj := testenv.ReadObject(t, fixture)
				if got := obj.GroupVersionKind().GroupKind(); got != gk {
					t.Fatalf("fixture is a %s, want %s", got, gk)
				}
				e, ok := evaluators[gk]
				if !ok {
					t.Fatalf("%s has no entry for %s", snippetFile, gk)
				}
				status, evalErr := e.evaluate(obj)
				got := expected{Status: status}

				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					out := "status: " + status + "\n"
					if status == unknown {
						out = "# No status yet: every expression fails with \"no such attribute\"; Flux keeps waiting.\n" + out
					}
					if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				var want expected
				readYAML(t, golden, &want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s on %s (evaluation error: %v): -want +got:\n%s", snippetFile, fixture, evalErr, diff)
				}

				var argo struct {
					Status  string `json:"status"`
					Message string `json:"message"`
				}
				readYAML(t, strings.TrimSuffix(fixture, ".yaml")+".expected.yaml", &argo)
				if status == unknown {
					// Only an object the controller has not written a status to yet may fail to
					// evaluate; Flux keeps waiting for it as it would for InProgress.
					if _, hasStatus := obj.Object["status"]; hasStatus || argo.Status != "Progressing" {
						t.Errorf("evaluation failed on an object with a status (Argo CD: %s): %v", argo.Status, evalErr)
					}
					return
				}
				if evalErr != nil {
					t.Fatalf("evaluation error with result %s: %v", status, evalErr)
				}
				if want := argoToFlux[argo.Status]; status != want {
					t.Errorf("Flux says %s, Argo CD says %s (%q), which corresponds to %s", status, argo.Status, argo.Message, want)
				}
			})
		}
	}
}

// TestOrder pins the evaluation order this package relies on and documents in the snippet:
// inProgress wins over failed and current, failed over current, nothing true is InProgress, and
// a differing status.observedGeneration wins over all expressions.
func TestOrder(t *testing.T) {
	env, err := fluxEnv()
	if err != nil {
		t.Fatal(err)
	}
	obj := func(generation, observed int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"generation": generation},
			"status":   map[string]any{"observedGeneration": observed},
		}}
	}
	cases := map[string]struct {
		reason string
		hc     customHealthCheck
		obj    *unstructured.Unstructured
		want   string
	}{
		"InProgressFirst": {
			reason: "inProgress is evaluated before failed and current",
			hc:     customHealthCheck{InProgress: "true", Failed: "true", Current: "true"},
			obj:    obj(1, 1),
			want:   inProgress,
		},
		"FailedBeforeCurrent": {
			reason: "failed is evaluated before current",
			hc:     customHealthCheck{InProgress: "false", Failed: "true", Current: "true"},
			obj:    obj(1, 1),
			want:   failed,
		},
		"NothingTrue": {
			reason: "no true expression means InProgress",
			hc:     customHealthCheck{InProgress: "false", Failed: "false", Current: "false"},
			obj:    obj(1, 1),
			want:   inProgress,
		},
		"ObservedGenerationFirst": {
			reason: "a status.observedGeneration that differs from metadata.generation is InProgress before any expression",
			hc:     customHealthCheck{Current: "true"},
			obj:    obj(2, 1),
			want:   inProgress,
		},
		"MissingStatusIsUnknown": {
			reason: "referencing status on an object without one is an evaluation error",
			hc:     customHealthCheck{Current: "status.?conditions.orValue([]).size() == 0"},
			obj:    &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(1)}}},
			want:   unknown,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := newEvaluator(env, tc.hc)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := e.evaluate(tc.obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// fixtures lists the shared fixtures of one kind.
func fixtures(t *testing.T, dir string) []string {
	t.Helper()
	return testenv.Fixtures(t, filepath.Join(fixtureDir, dir))
}

// checkNoStrayGoldens fails on a Flux golden whose fixture was renamed or removed.
func checkNoStrayGoldens(t *testing.T, dir string, fixtures []string) {
	t.Helper()
	goldens, err := filepath.Glob(filepath.Join("testdata", dir, "*.expected.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		name := strings.TrimSuffix(filepath.Base(g), ".expected.yaml")
		if !slices.Contains(fixtures, filepath.Join(fixtureDir, dir, name+".yaml")) {
			t.Errorf("%s has no fixture %s/%s/%s.yaml", g, fixtureDir, dir, name)
		}
	}
}
