package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// scaleTree writes the issue-11 scale tree: a kustomization with one SandboxTemplate, one
// SandboxWarmPool of replicas members and the render transformer (about 2 objects out per
// member: its Sandbox and its Pod).
func scaleTree(t testing.TB, dir string, replicas int) {
	t.Helper()
	files := map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: sandboxes\nresources:\n- template.yaml\n- pool.yaml\ntransformers:\n- render.yaml\n",
		"template.yaml":      "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata:\n  name: python\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: python\n        image: python:3.12-slim\n",
		"pool.yaml":          fmt.Sprintf("apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata:\n  name: python\nspec:\n  replicas: %d\n  sandboxTemplateRef:\n    name: python\n", replicas),
		"render.yaml":        "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: render\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: " + testenv.SandboxRender(t) + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// kustomizeLimit is the largest pool the benchmark has kustomize build: its exec-function path
// is quadratic (331 s at 3,000 on this hardware), so larger sizes would take an hour.
const kustomizeLimit = 1000

// BenchmarkBuildScale builds the scale tree at 300, 1,000, 3,000 and 10,000 pool members with
// sandbox-render build (the one-pass render) and, up to kustomizeLimit, with the real kustomize
// build --enable-alpha-plugins --enable-exec running the function, in the same run; where both
// run, their bytes must be equal. Reported: build-s, build-cpu-s, build-peak-MiB, the same for
// kustomize, and kustomize/build and kustomize/build-cpu (the figure: how much faster the
// one-pass build is, by wall and by CPU time, which the load of a shared machine distorts less). Targets: 3,000 under 5 s,
// 10,000 under 15 s and within 4x of 3,000 (linear).
func BenchmarkBuildScale(b *testing.B) {
	self := testenv.SandboxRender(b)
	for _, n := range []int{300, 1000, 3000, 10000} {
		b.Run(fmt.Sprintf("pool-%d", n), func(b *testing.B) {
			dir := b.TempDir()
			tree := filepath.Join(dir, "tree")
			if err := os.Mkdir(tree, 0o755); err != nil {
				b.Fatal(err)
			}
			scaleTree(b, tree, n)
			out := filepath.Join(dir, "build.yaml")
			var build measure
			b.ResetTimer()
			for range b.N {
				build.add(timed(b, dir, "", out, self, "build", tree))
			}
			b.StopTimer()
			build.report(b, "build", b.N)
			if n > kustomizeLimit {
				return
			}
			kustomize := testenv.Tool(b, "kustomize")
			kout := filepath.Join(dir, "kustomize.yaml")
			kust := timed(b, dir, "", kout, kustomize, "build", "--enable-alpha-plugins", "--enable-exec", tree)
			got, _ := os.ReadFile(out)
			want, _ := os.ReadFile(kout)
			if !bytes.Equal(got, want) {
				b.Fatalf("sandbox-render build differs from kustomize build at %d", n)
			}
			kust.report(b, "kustomize", 1)
			b.ReportMetric(kust.wall.Seconds()/(build.wall.Seconds()/float64(b.N)), "kustomize/build")
			b.ReportMetric(kust.cpu.Seconds()/(build.cpu.Seconds()/float64(b.N)), "kustomize/build-cpu")
		})
	}
}

// manyKeysSizes are the data keys of the ConfigMap BenchmarkManyKeys reads; the scaling check
// compares the third with the first, so a quadratic reader fails it before the largest runs.
var manyKeysSizes = []int{10_000, 20_000, 40_000, 100_000}

// BenchmarkManyKeys reads a ConfigMap with 10,000 to 100,000 data keys (about 1.4 MB at the
// largest) in every mode (render, validate, build, fn), each as the binary is run. Decoding must
// be linear in the input: at 4x the keys a mode may take at most 8x the CPU time of 10,000 (a
// quadratic reader takes 16x; kustomize's own reader made build take 533 s at 100,000). Reported:
// s, cpu-s and peak-MiB per mode and size.
func BenchmarkManyKeys(b *testing.B) {
	self := testenv.SandboxRender(b)
	for _, mode := range []string{"render", "validate", "build", "fn"} {
		b.Run(mode, func(b *testing.B) {
			cpu := map[int]float64{}
			quadratic := false
			for _, n := range manyKeysSizes {
				b.Run(fmt.Sprint(n), func(b *testing.B) {
					if quadratic {
						b.Skip("not linear at a smaller size; this one would take minutes")
					}
					dir := b.TempDir()
					cm := manyKeysConfigMap(n)
					files := map[string]string{"cm.yaml": cm, "kustomization.yaml": "resources:\n- cm.yaml\n",
						"list.yaml": "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(cm, "\n"), "\n", "\n  ") + "\n"}
					for name, content := range files {
						if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
							b.Fatal(err)
						}
					}
					in, args := "", []string{mode, filepath.Join(dir, "cm.yaml")}
					switch mode {
					case "build":
						args = []string{mode, dir}
					case "fn":
						in, args = filepath.Join(dir, "list.yaml"), []string{mode}
					}
					var m measure
					b.ResetTimer()
					for range b.N {
						m.add(timed(b, dir, in, filepath.Join(dir, "out.yaml"), self, args...))
					}
					b.StopTimer()
					m.report(b, mode, b.N)
					cpu[n] = m.cpu.Seconds() / float64(b.N)
					if first, third := manyKeysSizes[0], manyKeysSizes[2]; n == third && cpu[first] > 0 {
						if ratio := cpu[n] / cpu[first]; ratio > 8 {
							quadratic = true
							b.Fatalf("%s: %d keys took %.1fx the CPU time of %d (%.2f s against %.2f s): decoding is not linear", mode, n, ratio, first, cpu[n], cpu[first])
						}
					}
				})
			}
		})
	}
}

func manyKeysConfigMap(n int) string {
	var sb strings.Builder
	sb.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  key%06d: value%d\n", i, i)
	}
	return sb.String()
}
