package flux

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/gitopshealth"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*/*.expected.yaml from the expressions")

const (
	snippetFile = "health-check-exprs.yaml"
	// fixtureDir holds the objects shared with the Argo CD checks, and their Argo CD goldens.
	fixtureDir = "../argocd/testdata"
)

// kstatus results, short.
const (
	current    = gitopshealth.Current
	inProgress = gitopshealth.InProgress
	failed     = gitopshealth.Failed
	unknown    = gitopshealth.Unknown
)

// kinds are the agent-sandbox kinds the snippet must cover, by fixture directory.
var kinds = map[string]schema.GroupKind{
	"sandbox":         {Group: "agents.x-k8s.io", Kind: "Sandbox"},
	"sandboxclaim":    {Group: "extensions.agents.x-k8s.io", Kind: "SandboxClaim"},
	"sandboxwarmpool": {Group: "extensions.agents.x-k8s.io", Kind: "SandboxWarmPool"},
}

func readSnippet(t *testing.T) gitopshealth.Snippet {
	t.Helper()
	s, err := gitopshealth.ReadSnippet(snippetFile)
	if err != nil {
		t.Fatal(err)
	}
	return s
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
	env, err := gitopshealth.FluxEnv()
	if err != nil {
		t.Fatal(err)
	}
	evaluators := map[schema.GroupKind]*gitopshealth.FluxEvaluator{}
	for _, hc := range readSnippet(t).HealthCheckExprs {
		gk := schema.FromAPIVersionAndKind(hc.APIVersion, hc.Kind).GroupKind()
		e, err := gitopshealth.NewFluxEvaluator(env, hc)
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
				status, evalErr := e.Evaluate(obj)
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
	env, err := gitopshealth.FluxEnv()
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
		hc     gitopshealth.CustomHealthCheck
		obj    *unstructured.Unstructured
		want   string
	}{
		"InProgressFirst": {
			reason: "inProgress is evaluated before failed and current",
			hc:     gitopshealth.CustomHealthCheck{InProgress: "true", Failed: "true", Current: "true"},
			obj:    obj(1, 1),
			want:   inProgress,
		},
		"FailedBeforeCurrent": {
			reason: "failed is evaluated before current",
			hc:     gitopshealth.CustomHealthCheck{InProgress: "false", Failed: "true", Current: "true"},
			obj:    obj(1, 1),
			want:   failed,
		},
		"NothingTrue": {
			reason: "no true expression means InProgress",
			hc:     gitopshealth.CustomHealthCheck{InProgress: "false", Failed: "false", Current: "false"},
			obj:    obj(1, 1),
			want:   inProgress,
		},
		"ObservedGenerationFirst": {
			reason: "a status.observedGeneration that differs from metadata.generation is InProgress before any expression",
			hc:     gitopshealth.CustomHealthCheck{Current: "true"},
			obj:    obj(2, 1),
			want:   inProgress,
		},
		"MissingStatusIsUnknown": {
			reason: "referencing status on an object without one is an evaluation error",
			hc:     gitopshealth.CustomHealthCheck{Current: "status.?conditions.orValue([]).size() == 0"},
			obj:    &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(1)}}},
			want:   unknown,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := gitopshealth.NewFluxEvaluator(env, tc.hc)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := e.Evaluate(tc.obj)
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
