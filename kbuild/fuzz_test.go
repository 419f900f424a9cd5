package kbuild

import (
	"testing"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/fuzzseed"
)

// FuzzConfigFile reads a file of a tree as a build reads it before and while kustomize does
// (checkYAML, isSandboxRenderConfig, rewriteExecPath): never a panic, the same answer twice. kyaml's
// accessors panicked on a document that is a list (- a) in a file naming SandboxRender, and on a
// List's item that is one (issue 37).
func FuzzConfigFile(f *testing.F) {
	for _, s := range fuzzseed.Repros {
		f.Add([]byte(s))
	}
	for _, s := range fuzzseed.GoldenInputs() {
		f.Add([]byte(s))
	}
	fn := function{path: "/bin/sandbox-render", results: "/tmp/results"}
	f.Fuzz(func(t *testing.T, data []byte) {
		err1, err2 := checkYAML(data), checkYAML(data)
		if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
			t.Fatalf("checkYAML is not deterministic: %v vs %v", err1, err2)
		}
		if isSandboxRenderConfig(data) && sandboxRenderNode(data) == nil {
			t.Fatalf("a SandboxRender config that holds no SandboxRender")
		}
		out, changed, err := rewriteExecPath(data, fn)
		if err == nil && !changed && string(out) != string(data) {
			t.Fatalf("rewriteExecPath changed a file it says it left alone")
		}
		if changed && !isSandboxRenderConfig(out) && isSandboxRenderConfig(data) {
			t.Fatalf("rewriteExecPath made a config no config:\n%s", out)
		}
	})
}
