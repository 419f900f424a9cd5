package render

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// TestValidateVolumeClaimTemplates: a volume claim template whose PVC the API server would refuse
// is an error naming the field.
func TestValidateVolumeClaimTemplates(t *testing.T) {
	valid := func() agentsv1beta1.PersistentVolumeClaimTemplate {
		return agentsv1beta1.PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	const p = "spec.volumeClaimTemplates[0]"
	cases := map[string]struct {
		reason string
		mutate func(*agentsv1beta1.PersistentVolumeClaimTemplate)
		want   []string
	}{
		"valid": {reason: "a complete template", mutate: func(*agentsv1beta1.PersistentVolumeClaimTemplate) {}},
		"every mode": {reason: "the four modes the API server supports", mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
			v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany}
		}},
		"invalid access mode": {
			reason: "the schema takes any string; the PVC was refused",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
				v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteSometimes"}
			},
			want: []string{p + `.spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`},
		},
		"no access mode": {
			reason: "the PVC needs one",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) { v.Spec.AccessModes = nil },
			want:   []string{p + ".spec.accessModes: Required value: at least 1 access mode is required"},
		},
		"ReadWriteOncePod with another": {
			reason: "ReadWriteOncePod stands alone",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
				v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}
			},
			want: []string{p + ".spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"},
		},
		"invalid annotation key": {
			reason: "the schema takes any map of strings; the PVC was refused",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
				v.Annotations = map[string]string{"bad key": "x"}
			},
			want: []string{p + `.metadata.annotations: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		},
		"invalid label value": {
			reason: "the PVC carries the template's labels",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) { v.Labels = map[string]string{"app": "a b"} },
			want:   []string{p + `.metadata.labels: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		},
		"no storage": {
			reason: "the PVC needs a size",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
				v.Spec.Resources = corev1.VolumeResourceRequirements{}
			},
			want: []string{p + ".spec.resources[storage]: Required value: the size of the volume"},
		},
		"zero storage": {
			reason: "the size must be above zero",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
				v.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
			},
			want: []string{p + `.spec.resources[storage]: Invalid value: "0": must be greater than zero`},
		},
		"storage class and volume mode": {
			reason: "a class name is a DNS subdomain; a mode Block or Filesystem",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
				v.Spec.StorageClassName = ptr.To("Fast_SSD")
				v.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeMode("Raw"))
			},
			want: []string{
				p + `.spec.storageClassName: Invalid value: "Fast_SSD": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				p + `.spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"`,
			},
		},
		"selector": {
			reason: "the PVC's selector is a label selector",
			mutate: func(v *agentsv1beta1.PersistentVolumeClaimTemplate) {
				v.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a=b"}}
			},
			want: []string{p + `.spec.selector.matchLabels: Invalid value: "a=b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := valid()
			tc.mutate(&v)
			got := errorStrings(ValidateVolumeClaimTemplates([]agentsv1beta1.PersistentVolumeClaimTemplate{v}, field.NewPath("spec", "volumeClaimTemplates")))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestValidatePodTemplateVolumesAndImages: a pod volume name or an image the API server refuses in
// the Pod is an error on the template, naming the field.
func TestValidatePodTemplateVolumesAndImages(t *testing.T) {
	cases := map[string]struct {
		reason string
		name   string
		image  string
		// mountPath, when set, mounts the volume in the container there ("-": at "").
		mountPath string
		want      []string
	}{
		"valid":   {reason: "a DNS-1123 label", name: "workspace", image: "i"},
		"mounted": {reason: "a mount with a path", name: "workspace", image: "i", mountPath: "/workspace"},
		"mount without a path": {
			reason: "a mutated mountPath \"\" rendered a Pod the API server refuses (the differential test)",
			name:   "workspace", image: "i", mountPath: "-",
			want: []string{"spec.podTemplate.spec.containers[0].volumeMounts[0].mountPath: Required value: a volume mount needs the path it is mounted at"},
		},
		"image with whitespace": {
			reason: "an image of a tab rendered a Pod the API server refuses",
			name:   "workspace", image: "\t",
			want: []string{`spec.podTemplate.spec.containers[0].image: Invalid value: "\t": must not have leading or trailing whitespace`},
		},
		"not a label": {
			reason: "a mutated volume name rendered a Pod the API server refuses",
			name:   "2026-01-01T00:00:00Z", image: "i",
			want: []string{`spec.podTemplate.spec.volumes[0].name: Invalid value: "2026-01-01T00:00:00Z": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		},
		"empty": {
			reason: "every volume needs a name", image: "i",
			want: []string{"spec.podTemplate.spec.volumes[0].name: Required value: every volume needs a name"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pt := &agentsv1beta1.PodTemplate{}
			pt.Spec.Containers = []corev1.Container{{Name: "c", Image: tc.image}}
			pt.Spec.Volumes = []corev1.Volume{{Name: tc.name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			if tc.mountPath != "" {
				pt.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: tc.name, MountPath: strings.TrimPrefix(tc.mountPath, "-")}}
			}
			got := errorStrings(ValidatePodTemplate(pt, field.NewPath("spec", "podTemplate")))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
