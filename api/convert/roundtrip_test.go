package convert

import (
	"encoding/json"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// Randomised round trips, as Kubernetes tests its own API versions: every field of every kind
// filled at random (apimachinery's fuzzer with its ObjectMeta rules, plus ours so that the values
// the conversion treats specially come up often), passed through JSON as the API server would,
// converted to the other version and back, and compared with what went in.

const iterations = 300

// roundTripKind is one kind's conversion pair and the edits of the update tests.
type roundTripKind[A, B any] struct {
	toHub   func(*A) *B
	fromHub func(*B) *A
	// editA and editB make the same change in each version, to a field both versions hold alike.
	editA func(*A)
	editB func(*B)
}

var (
	sandboxKind = roundTripKind[agentsv1alpha1.Sandbox, agentsv1beta1.Sandbox]{
		toHub: SandboxToHub, fromHub: SandboxFromHub,
		editA: func(o *agentsv1alpha1.Sandbox) {
			o.Labels = setKey(o.Labels, "edited", "true")
			o.Spec.PodTemplate.Spec.Hostname = "edited"
		},
		editB: func(o *agentsv1beta1.Sandbox) {
			o.Labels = setKey(o.Labels, "edited", "true")
			o.Spec.PodTemplate.Spec.Hostname = "edited"
		},
	}
	templateKind = roundTripKind[extv1alpha1.SandboxTemplate, extv1beta1.SandboxTemplate]{
		toHub: SandboxTemplateToHub, fromHub: SandboxTemplateFromHub,
		editA: func(o *extv1alpha1.SandboxTemplate) {
			o.Labels = setKey(o.Labels, "edited", "true")
			o.Spec.EnvVarsInjectionPolicy = "Allowed"
		},
		editB: func(o *extv1beta1.SandboxTemplate) {
			o.Labels = setKey(o.Labels, "edited", "true")
			o.Spec.EnvVarsInjectionPolicy = "Allowed"
		},
	}
	claimKind = roundTripKind[extv1alpha1.SandboxClaim, extv1beta1.SandboxClaim]{
		toHub: SandboxClaimToHub, fromHub: SandboxClaimFromHub,
		editA: func(o *extv1alpha1.SandboxClaim) {
			o.Labels = setKey(o.Labels, "edited", "true")
			v := "x"
			o.Spec.Env = append(o.Spec.Env, extv1alpha1.EnvVar{Name: "EDITED", Value: &v})
		},
		editB: func(o *extv1beta1.SandboxClaim) {
			o.Labels = setKey(o.Labels, "edited", "true")
			v := "x"
			o.Spec.Env = append(o.Spec.Env, extv1beta1.EnvVar{Name: "EDITED", Value: &v})
		},
	}
	poolKind = roundTripKind[extv1alpha1.SandboxWarmPool, extv1beta1.SandboxWarmPool]{
		toHub: SandboxWarmPoolToHub, fromHub: SandboxWarmPoolFromHub,
		editA: func(o *extv1alpha1.SandboxWarmPool) {
			o.Labels = setKey(o.Labels, "edited", "true")
			o.Spec.TemplateRef.Name = "edited"
		},
		editB: func(o *extv1beta1.SandboxWarmPool) {
			o.Labels = setKey(o.Labels, "edited", "true")
			o.Spec.TemplateRef.Name = "edited"
		},
	}
)

func TestRandomRoundTrips(t *testing.T) {
	t.Run("Sandbox", func(t *testing.T) { testRoundTrips(t, sandboxKind) })
	t.Run("SandboxTemplate", func(t *testing.T) { testRoundTrips(t, templateKind) })
	t.Run("SandboxClaim", func(t *testing.T) { testRoundTrips(t, claimKind) })
	t.Run("SandboxWarmPool", func(t *testing.T) { testRoundTrips(t, poolKind) })
}

func testRoundTrips[A, B any](t *testing.T, k roundTripKind[A, B]) {
	cases := map[string]struct {
		reason string
		run    func(f *randfill.Filler) (want, got any)
	}{
		"v1alpha1 round trip": {
			reason: "v1alpha1 → v1beta1 → v1alpha1 gives back what was written",
			run: func(f *randfill.Filler) (any, any) {
				a := randomObject[A](f)
				return a, viaJSON(k.fromHub(viaJSON(k.toHub(a))))
			},
		},
		"v1beta1 round trip": {
			reason: "v1beta1 → v1alpha1 → v1beta1 gives back what was stored",
			run: func(f *randfill.Filler) (any, any) {
				b := randomObject[B](f)
				return b, viaJSON(k.toHub(viaJSON(k.fromHub(b))))
			},
		},
		"v1alpha1 update": {
			reason: "an update made through v1alpha1 keeps every v1beta1 field v1alpha1 cannot express",
			run: func(f *randfill.Filler) (any, any) {
				b := randomObject[B](f)
				a := viaJSON(k.fromHub(b))
				k.editA(a)
				k.editB(b)
				return viaJSON(b), viaJSON(k.toHub(a))
			},
		},
		"v1beta1 update": {
			reason: "an update made through v1beta1 keeps every v1alpha1 value v1beta1 cannot express",
			run: func(f *randfill.Filler) (any, any) {
				a := randomObject[A](f)
				b := viaJSON(k.toHub(a))
				k.editB(b)
				k.editA(a)
				return viaJSON(a), viaJSON(k.fromHub(b))
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for seed := range int64(iterations) {
				want, got := tc.run(newFiller(seed))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%s; seed %d (-want +got):\n%s", tc.reason, seed, diff)
				}
			}
		})
	}
}

// randomObject fills a new object at random, with its apiVersion and kind, as it comes out of
// JSON.
func randomObject[T any](f *randfill.Filler) *T {
	obj := new(T)
	f.Fill(obj)
	return viaJSON(obj)
}

// viaJSON passes obj through encoding/json, as every object between the API server and the
// webhook does: times to seconds, empty maps and lists to none, quantities canonical.
func viaJSON[T any](obj *T) *T {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

func newFiller(seed int64) *randfill.Filler {
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, conversionFuzzerFuncs)
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), runtimeserializer.NewCodecFactory(runtime.NewScheme())).
		NilChance(0.3).NumElements(0, 2).MaxDepth(12)
}

// conversionFuzzerFuncs bias the random values towards the ones the conversion treats
// specially, and keep the reserved annotations out of the input (the conversion owns them).
func conversionFuzzerFuncs(runtimeserializer.CodecFactory) []any {
	pick := func(c randfill.Continue, values ...string) string {
		if i := c.Intn(len(values) + 1); i < len(values) {
			return values[i]
		}
		return c.String(0)
	}
	return []any{
		// metav1.Time fills itself, but a nil *metav1.Time stays nil that way: fill the pointers.
		func(p **metav1.Time, c randfill.Continue) {
			if c.Bool() {
				*p = &metav1.Time{Time: time.Unix(c.Int63n(1<<32), 0)}
			}
		},
		func(o *agentsv1alpha1.Sandbox, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = agentsv1alpha1.GroupVersion.String(), agentsv1beta1.SandboxKind
			switch c.Intn(5) {
			case 0:
				o.Spec.Replicas = nil
			case 1, 2:
				r := int32(c.Intn(2))
				o.Spec.Replicas = &r
			}
			if c.Bool() {
				o.Status.Replicas = int32(c.Intn(2))
			}
			dropReserved(o.Annotations)
		},
		func(o *agentsv1beta1.Sandbox, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = agentsv1beta1.GroupVersion.String(), agentsv1beta1.SandboxKind
			dropReserved(o.Annotations)
		},
		func(m *agentsv1beta1.SandboxOperatingMode, c randfill.Continue) {
			*m = agentsv1beta1.SandboxOperatingMode(pick(c, "Running", "Suspended", ""))
		},
		func(o *extv1alpha1.SandboxTemplate, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = extv1alpha1.GroupVersion.String(), extv1beta1.SandboxTemplateKind
			dropReserved(o.Annotations)
			if c.Bool() {
				// Upstream's annotation is v1alpha1's way to say the policy.
				o.Annotations = setKey(o.Annotations, VolumeClaimTemplatesPolicyAnnotation, pick(c, "", "Allowed", "Overrides"))
			}
		},
		func(o *extv1beta1.SandboxTemplate, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = extv1beta1.GroupVersion.String(), extv1beta1.SandboxTemplateKind
			o.Spec.VolumeClaimTemplatesPolicy = extv1beta1.VolumeClaimTemplatesPolicy(pick(c, "", "Disallowed", "Allowed", "Overrides"))
			dropReserved(o.Annotations)
			delete(o.Annotations, VolumeClaimTemplatesPolicyAnnotation)
		},
		func(o *extv1alpha1.SandboxClaim, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = extv1alpha1.GroupVersion.String(), extv1beta1.SandboxClaimKind
			o.Spec.TemplateRef.Name = pick(c, "python", "python-pool", "")
			o.Status.SandboxStatus.Name = pick(c, "", o.Name, "python-pool-x7k2p", "nodash")
			dropReserved(o.Annotations)
		},
		func(o *extv1beta1.SandboxClaim, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = extv1beta1.GroupVersion.String(), extv1beta1.SandboxClaimKind
			o.Spec.WarmPoolRef.Name = pick(c, "shadow-pool-python", "shadow-pool-", "python-pool", "none", "default", "")
			o.Status.SandboxStatus.Name = pick(c, "", o.Name, "python-pool-x7k2p", "nodash")
			dropReserved(o.Annotations)
		},
		func(p *extv1alpha1.WarmPoolPolicy, c randfill.Continue) {
			*p = extv1alpha1.WarmPoolPolicy(pick(c, "none", "default", "", "python-pool", "python"))
		},
		func(o *extv1alpha1.SandboxWarmPool, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = extv1alpha1.GroupVersion.String(), extv1beta1.SandboxWarmPoolKind
			dropReserved(o.Annotations)
		},
		func(o *extv1beta1.SandboxWarmPool, c randfill.Continue) {
			c.FillNoCustom(o)
			o.APIVersion, o.Kind = extv1beta1.GroupVersion.String(), extv1beta1.SandboxWarmPoolKind
			dropReserved(o.Annotations)
		},
	}
}

func dropReserved(m map[string]string) {
	delete(m, V1alpha1Annotation)
	delete(m, V1beta1Annotation)
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}
