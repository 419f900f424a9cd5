package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// TestPoolReplicaLimit: replicas: 2147483647 ran out of memory in PoolMemberNames; a pool above
// the limit is a field error on spec.replicas before any member is allocated, and the limit is
// an option.
func TestPoolReplicaLimit(t *testing.T) {
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}}
	tmpl.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "a", Image: "busybox"}}
	pool := func(n int32) *extv1beta1.SandboxWarmPool {
		p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
		p.Spec.Replicas = ptr.To(n)
		p.Spec.TemplateRef.Name = "t"
		return p
	}
	cases := map[string]struct {
		reason  string
		n       int32
		opts    Options
		wantErr string
		members int
	}{
		"MaxInt32": {reason: "2^31-1 members died out of memory", n: 2147483647,
			wantErr: "spec.replicas: Invalid value: 2147483647: more than 10000 members in one pool"},
		"AtDefaultLimit": {reason: "the limit itself renders", n: 10000, members: 10000},
		"OverOption":     {reason: "the limit is an option", n: 6, opts: Options{MaxPoolReplicas: 5}, wantErr: "more than 5 members"},
		"AtOption":       {reason: "the limit is inclusive", n: 5, opts: Options{MaxPoolReplicas: 5}, members: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			children, err := Render(&Input{Templates: []*extv1beta1.SandboxTemplate{tmpl}, Pools: []*extv1beta1.SandboxWarmPool{pool(tc.n)}}, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nRender error = %v, want %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nRender: %v", tc.reason, err)
			}
			sandboxes := 0
			for _, c := range children {
				if c.GetObjectKind().GroupVersionKind().Kind == "Sandbox" {
					sandboxes++
				}
			}
			if sandboxes != tc.members {
				t.Errorf("%s\n%d members, want %d", tc.reason, sandboxes, tc.members)
			}
		})
	}
}
