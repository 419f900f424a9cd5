package gitopshealth_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/gitopshealth"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestOf checks that ArgoCDOf and FluxOf find the project's checks from the repository root
// and judge a recorded object as the checks' own goldens do.
func TestOf(t *testing.T) {
	root := testenv.RepoRoot()
	cases := map[string]struct {
		fixture    string
		argo, flux string
	}{
		"StuckRollout": {"sandboxwarmpool/recorded-rollout-stuck.yaml", "Degraded", gitopshealth.Failed},
		"Rolling":      {"sandboxwarmpool/recorded-rolling.yaml", "Progressing", gitopshealth.InProgress},
		"ClaimReady":   {"sandboxclaim/recorded-ready.yaml", "Healthy", gitopshealth.Current},
		"SandboxStuck": {"sandbox/recorded-image-pull-backoff.yaml", "Progressing", gitopshealth.InProgress},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := testenv.ReadObject(t, filepath.Join(root, "gitops/argocd/testdata", tc.fixture))
			argo, err := gitopshealth.ArgoCDOf(root, obj)
			if err != nil {
				t.Fatal(err)
			}
			flux, err := gitopshealth.FluxOf(root, obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([2]string{tc.argo, tc.flux}, [2]string{argo.Status, flux}); diff != "" {
				t.Errorf("[Argo CD, Flux] on %s: -want +got:\n%s", tc.fixture, diff)
			}
		})
	}
}
