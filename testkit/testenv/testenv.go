// Package testenv finds the real binaries that `make tools` builds and starts a real
// kube-apiserver and etcd for tests. Under CI=true a missing binary fails the test: a broken
// tools step must never turn into tests that silently skip.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
)

// RepoRoot is the root of this repository, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BinDir is where `make tools` links the binaries: $KUBEBUILDER_ASSETS if set, else ./bin.
func BinDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "bin")
}

// Tool returns the path of a binary built by `make tools`. When it is missing the test is
// skipped with instructions, or failed under CI=true.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(BinDir(), name)
	if _, err := exec.LookPath(p); err != nil {
		Missing(t, "%s not found at %s (%v); run `make tools` to build it from Go modules", name, p, err)
	}
	return p
}

// Missing skips, or under CI=true fails, a test whose real dependency is absent.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// StartAPIServer starts a real kube-apiserver and etcd with this project's CRDs installed exactly
// as config/default installs them, and stops them when the test ends. No conversion webhook runs,
// so v1alpha1 requests fail as they do in a cluster without the controller. Each start costs
// ~4 s and ~320 MB; start one per package.
func StartAPIServer(t testing.TB) (*rest.Config, []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	Tool(t, "kube-apiserver")
	Tool(t, "etcd")
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	env := Wrap(&envtest.Environment{BinaryAssetsDirectory: BinDir()})
	cfg := env.StartForTest(t)
	if err := InstallCRDs(cfg, crds); err != nil {
		t.Fatal(err)
	}
	return cfg, crds
}

// InstallCRDs installs crds as they are and waits until they are served. envtest's own
// installation (Environment.CRDs) rewrites or removes every conversion stanza, so a test that
// needs config/crd's conversion, or its own, installs the CRDs with this after Start.
func InstallCRDs(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	copies := make([]*apiextensionsv1.CustomResourceDefinition, len(crds))
	for i, c := range crds {
		copies[i] = c.DeepCopy()
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: copies, MaxTime: CRDInstallTimeout}); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	return nil
}

var (
	buildOnce   sync.Once
	buildErr    error
	buildOutput []byte
)

// SandboxRender builds this repository's sandbox-render into ./bin (the path the overlays' exec
// functions name) once per test binary, and returns its path. go test runs packages in parallel,
// so each builds to its own file and renames it into place: another package may be executing the
// binary at that moment, and a rename never hands it a half-written file.
func SandboxRender(t testing.TB) string {
	t.Helper()
	out := filepath.Join(RepoRoot(), "bin", "sandbox-render")
	buildOnce.Do(func() {
		tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "./cmd/sandbox-render")
		cmd.Dir = RepoRoot()
		if buildOutput, buildErr = cmd.CombinedOutput(); buildErr == nil {
			buildErr = os.Rename(tmp, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building sandbox-render: %v\n%s", buildErr, buildOutput)
	}
	return out
}

// NewEnvironment is the envtest environment of this project (its CRDs, the binaries `make tools`
// built) for packages that start one API server in TestMain and share it between tests. It
// returns an error naming the missing binary when the tools are not built.
//
// envtest points the CRDs' conversion at a local port of its own, where nothing listens: as in a
// cluster without the controller's webhook, v1alpha1 requests fail instead of being converted
// some other way (envtest would otherwise drop the conversion stanza, and the API server would
// serve v1alpha1 by renaming apiVersion, losing every field that differs).
func NewEnvironment() (*Environment, error) {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		p := filepath.Join(BinDir(), name)
		if _, err := exec.LookPath(p); err != nil {
			return nil, fmt.Errorf("%s not found at %s; run `make tools` to build it from Go modules", name, p)
		}
	}
	crds, err := crd.All()
	if err != nil {
		return nil, err
	}
	return Wrap(&envtest.Environment{
		BinaryAssetsDirectory: BinDir(),
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{IgnoreSchemeConvertible: true},
	}), nil
}

// SkipMain ends a TestMain whose real dependency is missing: exit 0 with the reason locally, or
// exit 1 under CI=true, where a broken tools step must never pass as "no tests".
func SkipMain(reason error) {
	if os.Getenv("CI") == "true" {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", reason)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "skipping: %v\n", reason)
	os.Exit(0)
}

// HelmCommand is a command running the helm `make tools` built (see Tool) with an empty
// configuration of its own and no cluster, so that nothing of this machine's helm or kubectl
// setup reaches a test.
func HelmCommand(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	bin := Tool(t, "helm")
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	return cmd
}
