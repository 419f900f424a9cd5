package golden

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestOverlays builds every overlay four ways and requires the same bytes, equal to its golden
// file (golden/testdata/overlays/<overlay>.yaml): the real kustomize binary from `make tools` with
// --enable-alpha-plugins --enable-exec running the freshly built sandbox-render (the exec path
// the overlays name), `sandbox-render build` (kustomize/api in process, the one-pass render), and
// kbuild.Build called directly, twice, once with the one-pass render (which must apply) and once
// with the function run as kustomize runs it.
func TestOverlays(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	self := testenv.SandboxRender(t)
	root := testenv.RepoRoot()
	dirs, err := filepath.Glob(filepath.Join(root, "overlays", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no overlays found: %v", err)
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			viaKustomize := runCmd(t, kustomize, "build", "--enable-alpha-plugins", "--enable-exec", dir)
			viaCLI := runCmd(t, self, "build", dir)
			if diff := cmp.Diff(string(viaKustomize), string(viaCLI)); diff != "" {
				t.Errorf("sandbox-render build differs from kustomize build (-kustomize +sandbox-render):\n%s", diff)
			}
			for _, slow := range []bool{false, true} {
				m, err := kbuild.Build(dir, self, kbuild.Options{NoFastPath: slow})
				if err != nil {
					t.Fatal(err)
				}
				if m.FastPath == slow {
					t.Errorf("kbuild.Build(NoFastPath: %v) took the one-pass render: %v (%s)", slow, m.FastPath, m.FallbackReason)
				}
				b, err := m.YAML()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(viaKustomize, b) {
					t.Errorf("kbuild.Build (NoFastPath: %v) differs from kustomize build:\n%s", slow, cmp.Diff(string(viaKustomize), string(b)))
				}
			}
			golden := filepath.Join("testdata", "overlays", name+".yaml")
			if *update {
				writeFile(t, golden, viaKustomize)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("no golden for overlay %s (run with -update): %v", name, err)
			}
			if diff := cmp.Diff(string(want), string(viaKustomize)); diff != "" {
				t.Errorf("overlay %s (-golden +built):\n%s", name, diff)
			}
		})
	}
}

func runCmd(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestKustomizeReportsFindings: a malformed input makes the function, run by real kustomize, exit
// non-zero with a finding that names the file, the object and the field; sandbox-render build
// fails the same way, placing the finding in its document as render does. kustomize drops the
// function's results on a failure: what a person sees is the function's standard error, then
// kustomize's own line.
func TestKustomizeReportsFindings(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	self := testenv.SandboxRender(t)
	dir := filepath.Join("testdata", "kustomize", "claim-env-disallowed")
	const finding = "error: SandboxClaim team-a/my-claim: spec.env: Forbidden: EnvVarsInjectionRejected: " +
		"environment variable injection rejected: environment variable injection is not allowed by the template policy\n"
	// noOrigins is the tree without buildMetadata: [originAnnotations], its function at self.
	noOrigins := t.TempDir()
	for _, name := range []string{"kustomization.yaml", "template.yaml", "claim.yaml", "render.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte("buildMetadata: [originAnnotations]\n"), nil, 1)
		b = bytes.Replace(b, []byte("../../../../bin/sandbox-render"), []byte(self), 1)
		writeFile(t, filepath.Join(noOrigins, name), b)
	}
	cases := map[string]struct {
		reason string
		args   []string
		// want is standard error.
		want string
	}{
		"kustomize": {
			reason: "the origin annotation names the file, relative to the tree kustomize builds, and no document",
			args:   []string{kustomize, "build", "--enable-alpha-plugins", "--enable-exec", dir},
			want:   "claim.yaml: " + finding + "sandbox-render: the input has problems\nError: couldn't execute function: exit status 1 \n",
		},
		"kustomize without originAnnotations": {
			reason: "kustomize gives the function no file: the finding names the object and the field, and the function says how to get the file",
			args:   []string{kustomize, "build", "--enable-alpha-plugins", "--enable-exec", noOrigins},
			want: finding + "sandbox-render: the input has problems; no item names its file " +
				"(kustomize names them with buildMetadata: [originAnnotations] in the kustomization)\nError: couldn't execute function: exit status 1 \n",
		},
		"sandbox-render build": {
			reason: "the file as the tree was given, and the document and line",
			args:   []string{self, "build", dir},
			want:   filepath.Join(dir, "claim.yaml") + ": document 1 (line 8): " + finding + "sandbox-render: the input has problems; nothing was written\n",
		},
		"sandbox-render build without originAnnotations": {
			reason: "the same: the build asks kustomize for origins",
			args:   []string{self, "build", noOrigins},
			want:   filepath.Join(noOrigins, "claim.yaml") + ": document 1 (line 8): " + finding + "sandbox-render: the input has problems; nothing was written\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(tc.args[0], tc.args[1:]...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatalf("%s: the build succeeded:\n%s", tc.reason, stdout.String())
			}
			if diff := cmp.Diff(tc.want, stderr.String()); diff != "" {
				t.Errorf("%s\nstandard error (-want +got):\n%s", tc.reason, diff)
			}
			if stdout.Len() > 0 {
				t.Errorf("a failed build wrote output:\n%s", stdout.String())
			}
		})
	}
}

// TestKustomizeValidatorAndGenerator runs the function as a validator (mode validate: the output
// equals the input built without it) and as a generator (its spec.resources and their children),
// with the real kustomize; and pins kustomize's bug that keeps exec functions out of validators:.
func TestKustomizeValidatorAndGenerator(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	testenv.SandboxRender(t)
	root := testenv.RepoRoot()
	validated := runCmd(t, kustomize, "build", "--enable-alpha-plugins", "--enable-exec", filepath.Join("testdata", "kustomize", "as-validator"))
	plain := runCmd(t, kustomize, "build", filepath.Join(root, "bases", "python-runtime"))
	if diff := cmp.Diff(string(plain), string(validated)); diff != "" {
		t.Errorf("the validator changed the build (-without +with):\n%s", diff)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kustomize, "build", "--enable-alpha-plugins", "--enable-exec", filepath.Join("testdata", "kustomize", "validators-field"))
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "validator shouldn't modify the resource map") {
		t.Errorf("kustomize's validators: field now runs exec functions (err %v, %s): kustomize issue #5036 is fixed; document validators: in docs/gitops.md", err, stderr.String())
	}
	generated := runCmd(t, kustomize, "build", "--enable-alpha-plugins", "--enable-exec", filepath.Join("testdata", "kustomize", "as-generator"))
	objs := objectsOf(t, generated)
	// The generator writes its config too, for the controller to render the namespace with.
	want := []string{"Pod generated/scratch", "Sandbox generated/scratch", "SandboxRender generated/generate"}
	if diff := cmp.Diff(want, objs); diff != "" {
		t.Errorf("generated objects (-want +got):\n%s", diff)
	}
}

func objectsOf(t *testing.T, b []byte) []string {
	t.Helper()
	objs, err := manifest.Parse("build", b)
	if err != nil {
		t.Fatal(err)
	}
	manifest.SortCanonical(objs)
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}
