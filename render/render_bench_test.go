package render

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// benchSandboxes builds n Sandboxes of the shape the issue names: one container, one volume
// claim template, service: true, already defaulted as manifest.Decode would leave them.
func benchSandboxes(n int) []*agentsv1beta1.Sandbox {
	out := make([]*agentsv1beta1.Sandbox, n)
	for i := range out {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sandbox-%05d", i), Namespace: "agents"}}
		sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
		sb.Spec.ShutdownPolicy = ptr.To(agentsv1beta1.ShutdownPolicyRetain)
		sb.Spec.Service = ptr.To(true)
		sb.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"app": "python"}
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{
			Name:         "python",
			Image:        "python:3.12",
			Ports:        []corev1.ContainerPort{{ContainerPort: 8888, Protocol: corev1.ProtocolTCP}},
			VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}},
		}}
		sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{
			EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "workspace"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}}
		out[i] = sb
	}
	return out
}

// BenchmarkRender10kSandboxes renders 10,000 Sandboxes per iteration, in process. Targets: at
// least 40,000 Sandboxes/s on one core (make bench runs -cpu 1) and under 40 KB allocated per
// Sandbox; the figures are reported as sandboxes/s and B/sandbox.
func BenchmarkRender10kSandboxes(b *testing.B) {
	const n = 10000
	in := &Input{Sandboxes: benchSandboxes(n)}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		children, err := Render(in, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(children) != 3*n {
			b.Fatalf("rendered %d children, want %d", len(children), 3*n)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	sandboxes := float64(n) * float64(b.N)
	b.ReportMetric(sandboxes/b.Elapsed().Seconds(), "sandboxes/s")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/sandboxes, "B/sandbox")
}

// benchBundle builds the bundle of the extensions benchmark: templates, pools of ten members
// and claims spread evenly over them, in 100 namespaces.
func benchBundle(templates, claims int) *Input {
	in := &Input{}
	for i := range templates {
		ns := fmt.Sprintf("team-%02d", i%100)
		t := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tmpl-%04d", i), Namespace: ns}}
		t.Spec.PodTemplate = benchSandboxes(1)[0].Spec.PodTemplate
		t.Spec.VolumeClaimTemplates = benchSandboxes(1)[0].Spec.VolumeClaimTemplates
		t.Spec.Service = ptr.To(true)
		t.Spec.NetworkPolicyManagement = extv1beta1.NetworkPolicyManagementManaged
		t.Spec.EnvVarsInjectionPolicy = extv1beta1.EnvVarsInjectionPolicyAllowed
		t.Spec.VolumeClaimTemplatesPolicy = extv1beta1.VolumeClaimTemplatesPolicyDisallowed
		in.Templates = append(in.Templates, t)
		p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%04d", i), Namespace: ns}}
		p.Spec.Replicas = ptr.To[int32](10)
		p.Spec.TemplateRef.Name = t.Name
		in.Pools = append(in.Pools, p)
	}
	for i := range claims {
		p := in.Pools[i%templates]
		c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%05d", i), Namespace: p.Namespace}}
		c.Spec.WarmPoolRef.Name = p.Name
		c.Spec.Env = []extv1beta1.EnvVar{{Name: "TASK", Value: ptr.To("bench")}}
		c.Spec.AdditionalPodMetadata.Labels = map[string]string{"sandbox.users.io/session": fmt.Sprintf("s%d", i)}
		in.Claims = append(in.Claims, c)
	}
	return in
}

// BenchmarkRenderExtensionsBundle renders 1,000 templates, 1,000 warm pools of 10 members and
// 10,000 claims per iteration: 1,000 NetworkPolicies and 20,000 Sandboxes with their Pods, PVCs
// and Services. Target: under 2 s per iteration on one core.
func BenchmarkRenderExtensionsBundle(b *testing.B) {
	in := benchBundle(1000, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		children, err := Render(in, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if want := 1000 + 20000*4; len(children) != want {
			b.Fatalf("rendered %d objects, want %d", len(children), want)
		}
	}
}
