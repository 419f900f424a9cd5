package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// benchResourceList writes a ResourceList of sandboxes Sandboxes (one container, one VCT,
// service: true) and others each of templates, warm pools (2 members) and claims. With distinct,
// every Sandbox's spec differs (an environment variable of its own), so the render's validation
// memo cannot share work between them, as it does for objects stamped from one template.
func benchResourceList(t testing.TB, path string, sandboxes, others int, distinct bool) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	for i := range sandboxes {
		env := ""
		if distinct {
			env = fmt.Sprintf("\n          env:\n          - name: SANDBOX_ID\n            value: \"%d\"", i)
		}
		fmt.Fprintf(&b, `- apiVersion: agents.x-k8s.io/v1beta1
  kind: Sandbox
  metadata:
    name: sandbox-%05d
    namespace: team-%02d
  spec:
    podTemplate:
      metadata:
        labels:
          app: python
      spec:
        containers:
        - name: python
          image: python:3.12
          ports:
          - containerPort: 8888%s
          volumeMounts:
          - name: workspace
            mountPath: /workspace
    volumeClaimTemplates:
    - metadata:
        name: workspace
      spec:
        accessModes: [ReadWriteOnce]
        resources:
          requests:
            storage: 1Gi
    service: true
`, i, i%100, env)
	}
	for i := range others {
		fmt.Fprintf(&b, `- apiVersion: extensions.agents.x-k8s.io/v1beta1
  kind: SandboxTemplate
  metadata:
    name: tmpl-%03d
    namespace: team-%02d
  spec:
    podTemplate:
      spec:
        containers:
        - name: python
          image: python:3.12
          ports:
          - containerPort: 8888
    envVarsInjectionPolicy: Allowed
- apiVersion: extensions.agents.x-k8s.io/v1beta1
  kind: SandboxWarmPool
  metadata:
    name: pool-%03d
    namespace: team-%02d
  spec:
    replicas: 2
    sandboxTemplateRef:
      name: tmpl-%03d
- apiVersion: extensions.agents.x-k8s.io/v1beta1
  kind: SandboxClaim
  metadata:
    name: claim-%03d
    namespace: team-%02d
  spec:
    warmPoolRef:
      name: pool-%03d
    env:
    - name: TASK
      value: bench
`, i, i, i, i, i, i, i, i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// measure is what one run of a command cost: wall time, CPU time (user plus system, which a
// shared machine's load distorts less than the wall time) and peak RSS.
type measure struct {
	wall, cpu time.Duration
	rss       int64
}

func (m *measure) add(o measure) {
	m.wall += o.wall
	m.cpu += o.cpu
	m.rss = max(m.rss, o.rss)
}

// report reports the mean of n runs as <prefix>-s, <prefix>-cpu-s and <prefix>-peak-MiB.
func (m measure) report(b *testing.B, prefix string, n int) {
	b.ReportMetric(m.wall.Seconds()/float64(n), prefix+"-s")
	b.ReportMetric(m.cpu.Seconds()/float64(n), prefix+"-cpu-s")
	b.ReportMetric(float64(m.rss)/(1<<20), prefix+"-peak-MiB")
}

// timed runs a command with stdin and stdout files and returns what it cost.
func timed(b *testing.B, dir, in, out string, name string, args ...string) measure {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	o, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	cmd.Stdout = o
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	elapsed := time.Since(start)
	return measure{wall: elapsed, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(),
		rss: cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024}
}

// BenchmarkFunctionEndToEnd runs the built function as kustomize would (a ResourceList on stdin,
// the result on stdout) on 10,000 Sandboxes plus 100 templates, pools and claims, with one spec
// shared by all Sandboxes and with every spec distinct. Targets: under 5 s, reported as fn-s and
// fn-peak-MiB.
func BenchmarkFunctionEndToEnd(b *testing.B) {
	for _, distinct := range []bool{false, true} {
		name := "shared-specs"
		if distinct {
			name = "distinct-specs"
		}
		b.Run(name, func(b *testing.B) {
			self := testenv.SandboxRender(b)
			dir := b.TempDir()
			input := filepath.Join(dir, "input.yaml")
			benchResourceList(b, input, 10000, 100, distinct)
			var fn measure
			b.ResetTimer()
			for range b.N {
				fn.add(timed(b, dir, input, filepath.Join(dir, "output.yaml"), self, "fn"))
			}
			b.StopTimer()
			fn.report(b, "fn", b.N)
		})
	}
}

// BenchmarkFunctionVsKustomizeFloor compares the function with the I/O floor: kustomize build of
// the objects the function rendered, as a plain kustomization. kustomize's build is super-linear
// in the number of objects (measured: 2,000 objects 8 s, 4,000 objects 85 s), so the full
// benchmark's 40,000 objects cannot be built in a run; this one uses 500 Sandboxes plus 5
// templates, pools and claims (about 2,000 objects). Reported: fn-s, kustomize-floor-s and
// fn/floor.
func BenchmarkFunctionVsKustomizeFloor(b *testing.B) {
	self := testenv.SandboxRender(b)
	kustomize := testenv.Tool(b, "kustomize")
	dir := b.TempDir()
	input := filepath.Join(dir, "input.yaml")
	benchResourceList(b, input, 500, 5, false)
	output := filepath.Join(dir, "output.yaml")
	timed(b, dir, input, output, self, "fn")
	floorDir := filepath.Join(dir, "rendered")
	if err := os.MkdirAll(floorDir, 0o755); err != nil {
		b.Fatal(err)
	}
	// render reads the ResourceList's items as a stream of objects and writes them back.
	rendered, err := exec.Command(self, "render", output).Output()
	if err == nil {
		err = os.WriteFile(filepath.Join(floorDir, "objects.yaml"), rendered, 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(floorDir, "kustomization.yaml"), []byte("resources:\n- objects.yaml\n"), 0o644)
	}
	if err != nil {
		b.Fatal(err)
	}
	var fn, floor measure
	b.ResetTimer()
	for range b.N {
		fn.add(timed(b, dir, input, output, self, "fn"))
		floor.add(timed(b, dir, "", filepath.Join(dir, "floor.yaml"), kustomize, "build", floorDir))
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(fn.wall.Seconds()/n, "fn-s")
	b.ReportMetric(floor.wall.Seconds()/n, "kustomize-floor-s")
	b.ReportMetric(fn.wall.Seconds()/floor.wall.Seconds(), "fn/floor")
}
