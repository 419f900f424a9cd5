package convert

import "testing"

// TestClaimWarmPool: the rule migrate and the typed conversion share for a claim's pool.
func TestClaimWarmPool(t *testing.T) {
	cases := map[string]struct {
		reason                           string
		policy, template, claim, sandbox string
		want                             string
	}{
		"named":          {"a policy naming a pool is that pool", "fast", "python", "c", "", "fast"},
		"named adopted":  {"a named pool wins over the adopted Sandbox", "fast", "python", "c", "other-x1", "fast"},
		"unset":          {"no policy is the default policy: the shadow pool", "", "python", "c", "", "shadow-pool-python"},
		"none":           {"none becomes the shadow pool too", "none", "python", "c", "", "shadow-pool-python"},
		"default warm":   {"a warm-adopted Sandbox names its pool", "default", "python", "c", "pool-a-x1b2", "pool-a"},
		"cold":           {"a Sandbox named as the claim is its cold one", "default", "python", "c", "c", "shadow-pool-python"},
		"no suffix":      {"a Sandbox name without a -suffix names no pool", "none", "python", "c", "solo", "shadow-pool-python"},
		"leading hyphen": {"a hyphen only at the start is no suffix", "", "python", "c", "-x", "shadow-pool-python"},
	}
	for name, c := range cases {
		if got := ClaimWarmPool(c.policy, c.template, c.claim, c.sandbox); got != c.want {
			t.Errorf("%s (%s): got %q, want %q", name, c.reason, got, c.want)
		}
	}
}

// TestIsV1alpha1: the two v1alpha1 groups convert; their v1beta1 and other groups do not.
func TestIsV1alpha1(t *testing.T) {
	for av, want := range map[string]bool{
		"agents.x-k8s.io/v1alpha1":            true,
		"extensions.agents.x-k8s.io/v1alpha1": true,
		"agents.x-k8s.io/v1beta1":             false,
		"extensions.agents.x-k8s.io/v1beta1":  false,
		"example.com/v1alpha1":                false,
		"v1":                                  false,
	} {
		if got := IsV1alpha1(av); got != want {
			t.Errorf("IsV1alpha1(%q) = %v, want %v", av, got, want)
		}
	}
}
