package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
)

// passThrough is an object the render does not own, written the way people write YAML: comments,
// unquoted yes, keys out of order, flow style. Every mode must give it back byte for byte.
const passThrough = `apiVersion: v1
kind: ConfigMap
# a comment inside
metadata: {name: flags, namespace: agents}
data:
  flag: yes   # YAML 1.1 would make this true
  answer: "42"
  a: on
`

// TestPassThroughIsByteIdentical: render rewrote a pass-through ConfigMap's flag: yes to true,
// corrupting an object it does not own; render and the function must both return it byte for
// byte.
func TestPassThroughIsByteIdentical(t *testing.T) {
	t.Run("render", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		in := passThrough + "---\n" + string(example)
		if code := run([]string{"render", "-"}, strings.NewReader(in), &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), passThrough) {
			t.Errorf("the ConfigMap did not come out byte for byte; output:\n%s", stdout.String())
		}
	})
	t.Run("fn", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		item := "- " + strings.ReplaceAll(strings.TrimSuffix(passThrough, "\n"), "\n", "\n  ") + "\n"
		in := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n" + item
		if code := run([]string{"fn"}, strings.NewReader(in), &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), item) {
			t.Errorf("the ConfigMap did not come out byte for byte; output:\n%s", stdout.String())
		}
	})
}

// TestDuplicateKeysRefusedInEveryMode: render kept the last of {image: busybox, image: alpine}
// while the function refused it; both refuse it now, naming the key and the line.
func TestDuplicateKeysRefusedInEveryMode(t *testing.T) {
	doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: a, image: busybox, image: alpine}\n"
	for _, mode := range []string{"render", "validate", "fn"} {
		t.Run(mode, func(t *testing.T) {
			in, args := doc, []string{mode, "-"}
			if mode == "fn" {
				in = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
				args = []string{"fn"}
			}
			var stdout, stderr bytes.Buffer
			code := run(args, strings.NewReader(in), &stdout, &stderr)
			if code == cli.ExitOK || !strings.Contains(stderr.String(), `mapping key "image" already defined at line`) {
				t.Errorf("exit %d, stderr:\n%s\nwant a failure naming the key and line", code, stderr.String())
			}
		})
	}
}
