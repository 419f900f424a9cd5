package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

func TestServicePorts(t *testing.T) {
	port := func(name string, p int32, proto corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, Protocol: proto, TargetPort: intstr.FromInt32(p)}
	}
	cases := map[string]struct {
		reason string
		spec   corev1.PodSpec
		want   []corev1.ServicePort
	}{
		"no ports": {
			reason: "a Service without ports is valid for a headless Service",
			spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}},
		},
		"port zero skipped": {
			reason: "containerPort 0 names no port",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Ports: []corev1.ContainerPort{
				{ContainerPort: 0, Name: "nothing"}, {ContainerPort: 80},
			}}}},
			want: []corev1.ServicePort{port("p-80-tcp", 80, corev1.ProtocolTCP)},
		},
		"plain init containers ignored": {
			reason: "only native sidecars serve traffic",
			spec: corev1.PodSpec{
				Containers:     []corev1.Container{{Name: "a"}},
				InitContainers: []corev1.Container{{Name: "i", Ports: []corev1.ContainerPort{{ContainerPort: 9}}}},
			},
		},
		"sidecar name loses to container name": {
			reason: "regular containers are read first",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 8080, Name: "web"}}}},
				InitContainers: []corev1.Container{{Name: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Ports: []corev1.ContainerPort{{ContainerPort: 8080, Name: "sidecar"}, {ContainerPort: 15000, Name: "admin", Protocol: corev1.ProtocolSCTP}}}},
			},
			want: []corev1.ServicePort{port("web", 8080, corev1.ProtocolTCP), port("admin", 15000, corev1.ProtocolSCTP)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, servicePorts(&tc.spec)); diff != "" {
				t.Errorf("%s: ServicePorts (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSyncPodMetadata(t *testing.T) {
	sb := func(labels, annotations map[string]string, sbLabels map[string]string) *agentsv1beta1.Sandbox {
		s := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "my-sandbox", Labels: sbLabels}}
		s.Spec.PodTemplate.ObjectMeta = agentsv1beta1.PodMetadata{Labels: labels, Annotations: annotations}
		return s
	}
	pod := func(labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
	}
	const hash = "374de8f5"
	cases := map[string]struct {
		reason          string
		pod             *corev1.Pod
		sandbox         *agentsv1beta1.Sandbox
		wantLabels      map[string]string
		wantAnnotations map[string]string
	}{
		"template dropped a label": {
			reason: "keys listed as propagated but gone from the template are deleted; foreign keys stay",
			pod: pod(map[string]string{"app": "a", "old": "x", "kubectl.kubernetes.io/restartedAt": "now", agentsv1beta1.SandboxNameHashLabel: hash},
				map[string]string{agentsv1beta1.SandboxPropagatedLabelsAnnotation: "app,old"}),
			sandbox:         sb(map[string]string{"app": "b"}, nil, nil),
			wantLabels:      map[string]string{"app": "b", "kubectl.kubernetes.io/restartedAt": "now", agentsv1beta1.SandboxNameHashLabel: hash},
			wantAnnotations: map[string]string{agentsv1beta1.SandboxPropagatedLabelsAnnotation: "app"},
		},
		"hash label forced": {
			reason:          "a Pod whose hash label was edited gets it back",
			pod:             pod(map[string]string{agentsv1beta1.SandboxNameHashLabel: "00000000"}, nil),
			sandbox:         sb(nil, nil, nil),
			wantLabels:      map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
			wantAnnotations: nil,
		},
		"warm pool label and created-by removed after adoption": {
			reason: "extension labels exist only while computed; created-by follows the Sandbox",
			pod: pod(map[string]string{agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.SandboxWarmPoolLabel: "244dc158", agentsv1beta1.CreatedByLabel: "controller"},
				map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true", agentsv1beta1.SandboxPropagatedAnnotationsAnnotation: "cluster-autoscaler.kubernetes.io/safe-to-evict"}),
			sandbox:         sb(nil, map[string]string{"team": "ml"}, map[string]string{agentsv1beta1.CreatedByLabel: "go-client"}),
			wantLabels:      map[string]string{agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.CreatedByLabel: "go-client"},
			wantAnnotations: map[string]string{"team": "ml", agentsv1beta1.SandboxPropagatedAnnotationsAnnotation: "team"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			labels, annotations := syncPodMetadata(tc.pod, tc.sandbox)
			if diff := cmp.Diff(tc.wantLabels, labels); diff != "" {
				t.Errorf("%s: labels (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantAnnotations, annotations); diff != "" {
				t.Errorf("%s: annotations (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSandboxRejectsInvalidInputWhole(t *testing.T) {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name", Namespace: "ns"}}
	sb.Spec.Service = ptr.To(true)
	c, err := Sandbox(sb, Options{})
	if c != nil {
		t.Errorf("Sandbox returned children for invalid input: %+v", c)
	}
	ie, ok := err.(*InvalidError)
	if !ok {
		t.Fatalf("Sandbox error = %T %v, want *InvalidError", err, err)
	}
	var got []string
	for _, e := range ie.Errs {
		got = append(got, e.Field)
	}
	want := []string{"metadata.name", "spec.podTemplate.spec.containers", "metadata.name"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("field paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("Sandbox ns/Bad_Name", ie.Object()); diff != "" {
		t.Errorf("object (-want +got):\n%s", diff)
	}
}
