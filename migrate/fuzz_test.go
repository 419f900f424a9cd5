package migrate

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzMigrate: migrate never panics on any input; whatever it converts, converting again changes
// nothing; and a file without v1alpha1 objects comes back byte for byte. The seeds are the golden
// inputs plus a few odd shapes.
func FuzzMigrate(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*/input.yaml")
	for _, p := range inputs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"", "---\n---\n", "# only a comment\n", "[1, 2]\n", "apiVersion: agents.x-k8s.io/v1alpha1\n",
		"apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nspec: {replicas: 0}\n",
		"apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nspec:\n  replicas: 7\n",
		"apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxClaim\nspec:\n  sandboxTemplateRef: {name: x}\n  warmpool: [a]\n",
		"apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  annotations: {api.agents.x-k8s.io/v1beta1-volume-claim-templates-policy: Allowed}\nspec: {}\n",
		"--- {a: 1}\n", "a: &x 1\nb: *x\n",
		// Read as render reads them: duplicate keys, byte-order marks.
		"apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nspec:\n  replicas: 0\n  replicas: 1\n",
		"apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nspec: {replicas: 0}\nspec: {}\n",
		"\xef\xbb\xbfapiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nspec: {replicas: 0}\n",
		"a: 1\n---\n\xef\xbb\xbfb: 2\n", "\xff\xfea\x00:\x00 \x001\x00\n\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		out, res, err := file.Migrate(Options{})
		if err != nil || res.Failed() {
			return
		}
		if !res.Changed && !bytes.Equal(out, data) {
			t.Fatalf("unchanged, yet the bytes differ:\n%q\n%q", data, out)
		}
		again, err := Parse("fuzz.yaml", out)
		if err != nil {
			t.Fatalf("the output does not parse: %v\n%s", err, out)
		}
		out2, res2, err := again.Migrate(Options{})
		if err != nil || res2.Failed() || res2.Changed || !bytes.Equal(out, out2) {
			t.Fatalf("not idempotent (err %v):\n%s\n---- then ----\n%s", err, out, out2)
		}
	})
}
