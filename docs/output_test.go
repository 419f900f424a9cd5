package docs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// The README's statements about what its first command prints, and about how `render` of a
// directory differs from it. TestFirstCommandOutput holds each to the binary's output; a README
// edit that drops one of them fails here, so the statement and its check change together.
var outputStatements = []string{
	"all in the tree's namespace `team-a` on stdout. That is a NetworkPolicy, four Sandboxes (the\npool's two members and one per claim) and their four Pods, and the tree's `render.yaml`, the\nSandboxRender",
	"so its objects have no namespace, the pool's\nmembers get other names (a member's name hashes its namespace), and the output is sorted by kind\nand name.",
}

// object is what the test reads of each output object.
type object struct{ Kind, Namespace, Name string }

// TestFirstCommandOutput runs the README's first command (`sandbox-render build docs/example`)
// and `sandbox-render render docs/example`, and checks what the README says of their output:
// build prints the tree's inputs and exactly one NetworkPolicy, four Sandboxes (the pool's two
// members and alice and bob) with a Pod each, and the SandboxRender, all in team-a; render prints
// the same kinds without a namespace, with other member names, sorted by kind and name.
func TestFirstCommandOutput(t *testing.T) {
	root := testenv.RepoRoot()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range outputStatements {
		if !bytes.Contains(readme, []byte(s)) {
			t.Errorf("README.md no longer says %q: change this test with it", s)
		}
	}
	bin := testenv.SandboxRender(t)
	built := decodeObjects(t, run(t, root, bin, "build", "docs/example"))
	rendered := decodeObjects(t, run(t, root, bin, "render", "docs/example"))

	count := func(objs []object) map[string]int {
		n := map[string]int{}
		for _, o := range objs {
			n[o.Kind]++
		}
		return n
	}
	want := map[string]int{
		"SandboxTemplate": 1, "SandboxWarmPool": 1, "SandboxClaim": 2, // the tree's inputs
		"NetworkPolicy": 1, "Sandbox": 4, "Pod": 4, "SandboxRender": 1,
	}
	if diff := cmp.Diff(want, count(built)); diff != "" {
		t.Errorf("build docs/example: objects by kind (-README +output):\n%s", diff)
	}
	if diff := cmp.Diff(want, count(rendered)); diff != "" {
		t.Errorf("render docs/example: objects by kind (-README +output):\n%s", diff)
	}
	for _, o := range built {
		if o.Namespace != "team-a" {
			t.Errorf("build docs/example: %s %s is in namespace %q, not team-a", o.Kind, o.Name, o.Namespace)
		}
	}
	for _, o := range rendered {
		if o.Namespace != "" {
			t.Errorf("render docs/example: %s %s has namespace %q; the README says none", o.Kind, o.Name, o.Namespace)
		}
	}

	// Each Sandbox has its Pod; alice and bob are the claims' own, the other two are the pool's
	// members, named python-<hash> by build and by render alike, but not the same names.
	names := func(objs []object, kind string) []string {
		var out []string
		for _, o := range objs {
			if o.Kind == kind {
				out = append(out, o.Name)
			}
		}
		sort.Strings(out)
		return out
	}
	members := func(objs []object) []string {
		var out []string
		for _, name := range names(objs, "Sandbox") {
			if name != "alice" && name != "bob" {
				if !strings.HasPrefix(name, "python-") {
					t.Errorf("Sandbox %s is neither a claim's nor the pool python's member", name)
				}
				out = append(out, name)
			}
		}
		return out
	}
	for what, objs := range map[string][]object{"build": built, "render": rendered} {
		if diff := cmp.Diff(names(objs, "Sandbox"), names(objs, "Pod")); diff != "" {
			t.Errorf("%s docs/example: Sandboxes and Pods differ (-Sandbox +Pod):\n%s", what, diff)
		}
		if got := members(objs); len(got) != 2 {
			t.Errorf("%s docs/example: pool members %v, want two", what, got)
		}
	}
	if b, r := members(built), members(rendered); len(b) == 2 && len(r) == 2 {
		for _, name := range r {
			if name == b[0] || name == b[1] {
				t.Errorf("render and build both name a member %s; the README says render's names differ", name)
			}
		}
	}

	sorted := sort.SliceIsSorted(rendered, func(i, j int) bool {
		if rendered[i].Kind != rendered[j].Kind {
			return rendered[i].Kind < rendered[j].Kind
		}
		return rendered[i].Name < rendered[j].Name
	})
	if !sorted {
		t.Errorf("render docs/example is not sorted by kind and name: %v", rendered)
	}
}

// run runs the binary in dir and returns its standard output; it fails the test on any error.
func run(t *testing.T, dir, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sandbox-render %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// decodeObjects reads a YAML stream into each object's kind, namespace and name, in order.
func decodeObjects(t *testing.T, b []byte) []object {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []object
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding the output: %v", err)
		}
		if u.Object == nil {
			continue
		}
		out = append(out, object{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()})
	}
}
