package renderconfig

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-gitops/sandbox-gitops/policies"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestResolve: which config renders a namespace, and what each SandboxRender there says.
func TestResolve(t *testing.T) {
	fallback := render.Options{ClusterDomain: "fallback.example"}
	clusterDNS := render.Options{Policies: policies.Config{NetworkPolicy: policies.NetworkPolicyDefaults{DNS: policies.DNSClusterDNS}}}
	cases := map[string]struct {
		objs      []Object
		want      render.Options
		inForce   string
		wantErr   string
		wantReady map[string]metav1.Condition
	}{
		"NoneIsTheFallback": {
			want:      fallback,
			wantReady: map[string]metav1.Condition{},
		},
		"OneReplacesTheFallbackWhole": {
			objs:    []Object{{Name: "render", Generation: 3, Spec: []byte(`{"policies":{"networkPolicy":{"dns":"cluster-dns"}}}`)}},
			want:    clusterDNS,
			inForce: "render",
			wantReady: map[string]metav1.Condition{"render": {Type: "Ready", Status: "True", Reason: "InForce", ObservedGeneration: 3,
				Message: "generation 3 renders the agent-sandbox objects of namespace team-a"}},
		},
		"EmptySpecIsTheDefaults": {
			objs:    []Object{{Name: "render", Generation: 1}},
			want:    render.Options{},
			inForce: "render",
			wantReady: map[string]metav1.Condition{"render": {Type: "Ready", Status: "True", Reason: "InForce", ObservedGeneration: 1,
				Message: "generation 1 renders the agent-sandbox objects of namespace team-a"}},
		},
		"FunctionOnlyKnobsIgnored": {
			objs:    []Object{{Name: "render", Generation: 1, Spec: []byte(`{"mode":"validate","keepSources":false,"keepSourceVersions":true}`)}},
			want:    render.Options{},
			inForce: "render",
			wantReady: map[string]metav1.Condition{"render": {Type: "Ready", Status: "True", Reason: "InForce", ObservedGeneration: 1,
				Message: "generation 1 renders the agent-sandbox objects of namespace team-a"}},
		},
		"InvalidNamesTheField": {
			objs:    []Object{{Name: "render", Generation: 2, Spec: []byte(`{"policies":{"networkPolicy":{"dns":"quad9"}}}`)}},
			wantErr: `SandboxRender team-a/render: spec.policies.networkPolicy.dns: Unsupported value: "quad9": supported values: "public-resolvers", "cluster-dns"`,
			wantReady: map[string]metav1.Condition{"render": {Type: "Ready", Status: "False", Reason: "Invalid", ObservedGeneration: 2,
				Message: `spec.policies.networkPolicy.dns: Unsupported value: "quad9": supported values: "public-resolvers", "cluster-dns"; the objects of namespace team-a keep their last good render until it is fixed`}},
		},
		"UnknownField": {
			objs:    []Object{{Name: "render", Generation: 1, Spec: []byte(`{"polices":{}}`)}},
			wantErr: "SandboxRender team-a/render: spec.polices: Forbidden: unknown field (did you mean `policies`?)",
			wantReady: map[string]metav1.Condition{"render": {Type: "Ready", Status: "False", Reason: "Invalid", ObservedGeneration: 1,
				Message: "spec.polices: Forbidden: unknown field (did you mean `policies`?); the objects of namespace team-a keep their last good render until it is fixed"}},
		},
		"NowRefused": {
			objs:    []Object{{Name: "render", Generation: 1, Spec: []byte(`{"now":"2026-06-01T12:00:00Z"}`)}},
			wantErr: `SandboxRender team-a/render: spec.now: Forbidden: previews a moment in a render; the controller uses its clock, remove it (the function leaves it out of the copy it writes)`,
			wantReady: map[string]metav1.Condition{"render": {Type: "Ready", Status: "False", Reason: "Invalid", ObservedGeneration: 1,
				Message: `spec.now: Forbidden: previews a moment in a render; the controller uses its clock, remove it (the function leaves it out of the copy it writes); the objects of namespace team-a keep their last good render until it is fixed`}},
		},
		"TwoConflict": {
			objs:    []Object{{Name: "b", Generation: 1}, {Name: "a", Generation: 4, Spec: []byte(`{"clusterDomain":"x.example"}`)}},
			wantErr: "namespace team-a has 2 SandboxRenders (a, b): one namespace is rendered with one",
			wantReady: map[string]metav1.Condition{
				"a": {Type: "Ready", Status: "False", Reason: "Conflict", ObservedGeneration: 4,
					Message: "namespace team-a has 2 SandboxRenders (a, b) and is rendered with one: delete all but one; until then its objects keep their last good render"},
				"b": {Type: "Ready", Status: "False", Reason: "Conflict", ObservedGeneration: 1,
					Message: "namespace team-a has 2 SandboxRenders (a, b) and is rendered with one: delete all but one; until then its objects keep their last good render"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for range 2 { // shuffled, twice: the order of the cache's list does not matter
				objs := append([]Object(nil), tc.objs...)
				rand.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
				got := Resolve("team-a", objs, fallback)
				gotErr := ""
				if got.Err != nil {
					gotErr = got.Err.Error()
				}
				if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
					t.Errorf("Err (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantReady, got.Ready); diff != "" {
					t.Errorf("Ready (-want +got):\n%s", diff)
				}
				if got.Err == nil {
					if diff := cmp.Diff(tc.want, got.Options); diff != "" {
						t.Errorf("Options (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(tc.inForce, got.InForce); diff != "" {
						t.Errorf("InForce (-want +got):\n%s", diff)
					}
				}
			}
		})
	}
}

// FuzzFromSpec: whatever spec a SandboxRender in the cluster holds, reading it ends in a config
// or in field errors, never a panic; a config it accepts resolves as in force.
func FuzzFromSpec(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"policies":{"networkPolicy":{"dns":"cluster-dns"}}}`,
		`{"policies":{"packs":{"restricted":"yes"}}}`, `{"now":"2026-06-01T12:00:00Z"}`, `{"now":7}`,
		`{"allowedLabelDomains":["a.b",7]}`, `{"maxPoolReplicas":-1}`, `{"polices":{}}`,
		`{"resources":[{"kind":"Sandbox"}]}`, `{"clusterDomain":"bad domain!"}`,
		`{"policies":{"networkPolicy":{"dnsMode":"cluster-dns"}}}`, `{"Mode":"expand"}`,
		`{"policies":{"networkPolicy":{"routers":[{"namespace":"r","podLabel":{}}]}}}`, `{"policies":{"packs":{"runtimeClass":[1]}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		cfg, errs := FromSpec(spec)
		if (cfg == nil) == (len(errs) == 0) {
			t.Fatalf("FromSpec(%q) = %v, %v: want a config or errors", spec, cfg, errs)
		}
		res := Resolve("ns", []Object{{Name: "r", Generation: 1, Spec: spec}}, render.Options{})
		if (res.Err == nil) != (cfg != nil) || res.Ready["r"].Reason == "" {
			t.Fatalf("Resolve of %q: %+v, but FromSpec gave %v, %v", spec, res, cfg, errs)
		}
	})
}
