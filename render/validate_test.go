package render

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
			got := errorStrings(ValidatePodTemplate(pt, nil, field.NewPath("spec", "podTemplate")))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestValidatePodTemplateAsTheAPIServer: every Pod field a bad-input pass found rendered with
// exit 0 and then refused by the API server (issue 37) is an error naming the field, as written
// under the pod template, and the value; the values next to them that the API server accepts
// are accepted (golden's TestDifferentialPodFields holds the verdicts to a real API server).
func TestValidatePodTemplateAsTheAPIServer(t *testing.T) {
	const c0 = "spec.podTemplate.spec.containers[0]"
	valid := func() *agentsv1beta1.PodTemplate {
		pt := &agentsv1beta1.PodTemplate{}
		pt.Spec.Containers = []corev1.Container{{
			Name: "c", Image: "i",
			Env:   []corev1.EnvVar{{Name: "HOME", Value: "/root"}},
			Ports: []corev1.ContainerPort{{ContainerPort: 8888}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/work"}},
		}}
		pt.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		return pt
	}
	vcts := []agentsv1beta1.PersistentVolumeClaimTemplate{{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"}}}
	env := func(name string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Containers[0].Env[0].Name = name }
	}
	from := func(src corev1.EnvVarSource) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Containers[0].Env[0] = corev1.EnvVar{Name: "X", ValueFrom: &src} }
	}
	requests := func(rl corev1.ResourceList) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { maps.Copy(s.Containers[0].Resources.Requests, rl) }
	}
	limits := func(rl corev1.ResourceList) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { maps.Copy(s.Containers[0].Resources.Limits, rl) }
	}
	mount := func(f func(*corev1.VolumeMount)) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { f(&s.Containers[0].VolumeMounts[0]) }
	}
	toleration := func(tol corev1.Toleration) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{tol} }
	}
	q := resource.MustParse
	cases := map[string]struct {
		reason string
		mutate func(*corev1.PodSpec)
		want   []string
	}{
		"valid": {reason: "the base template", mutate: func(*corev1.PodSpec) {}},

		"env name A=B": {reason: "'=' ends a name in the environment", mutate: env("A=B"),
			want: []string{c0 + `.env[0].name: Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII characters other than '='`}},
		"env name =": {reason: "'=' alone", mutate: env("="),
			want: []string{c0 + `.env[0].name: Invalid value: "=": a valid environment variable name must consist only of printable ASCII characters other than '='`}},
		"env name empty": {reason: "a name is required", mutate: env(""),
			want: []string{c0 + ".env[0].name: Required value: every environment variable needs a name"}},
		"env name newline": {reason: "a control character", mutate: env("a\nb"),
			want: []string{c0 + `.env[0].name: Invalid value: "a\nb": a valid environment variable name must consist only of printable ASCII characters other than '='`}},
		"env name ä": {reason: "not ASCII", mutate: env("ä"),
			want: []string{c0 + `.env[0].name: Invalid value: "ä": a valid environment variable name must consist only of printable ASCII characters other than '='`}},
		"env name relaxed": {reason: "since v1.34 any printable ASCII but '=' is a name", mutate: env("1 a.b-c:{x}")},
		"env valueFrom without a source": {reason: "valueFrom needs a source", mutate: from(corev1.EnvVarSource{}),
			want: []string{c0 + ".env[0].valueFrom: Required value: one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef or fileKeyRef"}},
		"env value and valueFrom": {reason: "one or the other",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].Env[0].ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
			},
			want: []string{c0 + ".env[0].valueFrom: Forbidden: may not be specified when `value` is not empty"}},
		"env two sources": {reason: "one source",
			mutate: from(corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}, SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}),
			want:   []string{c0 + ".env[0].valueFrom: Forbidden: may not have more than one field specified at a time"}},
		"env fieldRef": {reason: "the downward API, a label by its key",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].Env = []corev1.EnvVar{
					{Name: "A", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['app']"}}},
					{Name: "C", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.host"}}},
				}
			}},
		"env fieldRef unsupported": {reason: "status.phase is not for env",
			mutate: from(corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.phase"}}),
			want:   []string{c0 + `.env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "status.phase": supported values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"`}},
		"env fieldRef bad subscript": {reason: "a key in ['...'] only for labels and annotations, and a qualified name",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].Env = []corev1.EnvVar{
					{Name: "A", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name['x']"}}},
					{Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['a b']"}}},
					{Name: "C", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}},
					{Name: "D", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{}}},
				}
			},
			want: []string{
				c0 + `.env[0].valueFrom.fieldRef.fieldPath: Invalid value: "metadata.name['x']": only metadata.labels and metadata.annotations take a key in ['...']`,
				c0 + `.env[1].valueFrom.fieldRef.fieldPath: Invalid value: "metadata.annotations['a b']": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				c0 + `.env[2].valueFrom.fieldRef.apiVersion: Unsupported value: "v2": supported values: "v1"`,
				c0 + ".env[3].valueFrom.fieldRef.fieldPath: Required value: the field of the Pod to read, such as metadata.name",
			}},
		"env key refs": {reason: "a ConfigMap or Secret name and key the API server accepts",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].Env = []corev1.EnvVar{
					{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "Bad_Name"}, Key: "k"}}},
					{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "a/b"}}},
					{Name: "C", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{}}},
				}
			},
			want: []string{
				c0 + `.env[0].valueFrom.configMapKeyRef.name: Invalid value: "Bad_Name": ConfigMap name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				c0 + `.env[1].valueFrom.secretKeyRef.key: Invalid value: "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
				c0 + ".env[2].valueFrom.secretKeyRef.key: Required value: the key of the Secret to read the variable from",
				c0 + ".env[2].valueFrom.secretKeyRef.name: Required value: the Secret in the Pod's namespace to read the variable from",
			}},
		"env resourceFieldRef": {reason: "a resource of the container a variable may read",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].Env = []corev1.EnvVar{
					{Name: "A", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}},
					{Name: "B", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.hugepages-2Mi"}}},
				}
			},
			want: []string{c0 + `.env[0].valueFrom.resourceFieldRef.resource: Unsupported value: "limits.gpu": supported values: "limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", "requests.ephemeral-storage", "requests.memory"`}},
		"env fileKeyRef": {reason: "an env file is read from an emptyDir volume of the Pod",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].Env = []corev1.EnvVar{
					{Name: "A", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "work", Path: "e", Key: "k"}}},
					{Name: "B", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "data", Path: "e", Key: "k"}}},
					{Name: "C", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "none", Path: "e", Key: "k"}}},
				}
			},
			want: []string{
				c0 + `.env[1].valueFrom.fileKeyRef.volumeName: Invalid value: "data": referenced volume must be of type emptyDir`,
				c0 + `.env[2].valueFrom.fileKeyRef.volumeName: Not found: "none": no volume of the Pod has this name`,
			}},
		"envFrom": {reason: "a prefix is a variable name; exactly one source, by a name the API server accepts",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].EnvFrom = []corev1.EnvFromSource{
					{Prefix: "A=", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{}, SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "S"}}},
					{Prefix: "P_"},
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "prefix-"}}},
				}
			},
			want: []string{
				c0 + `.envFrom[0].prefix: Invalid value: "A=": a valid environment variable name must consist only of printable ASCII characters other than '='`,
				c0 + ".envFrom[1]: Forbidden: may not have more than one field specified at a time",
				c0 + ".envFrom[1].configMapRef.name: Required value: the ConfigMap in the Pod's namespace to read the variables from",
				c0 + `.envFrom[1].secretRef.name: Invalid value: "S": Secret name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				c0 + ".envFrom[2]: Required value: one of configMapRef or secretRef",
			}},

		"request negative": {reason: "a quantity is at least 0", mutate: requests(corev1.ResourceList{corev1.ResourceCPU: q("-1")}),
			want: []string{c0 + `.resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`}},
		"request above its limit": {reason: "a request is at most its limit", mutate: requests(corev1.ResourceList{corev1.ResourceCPU: q("2")}),
			want: []string{c0 + `.resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1`}},
		"request at its limit": {reason: "equal is fine", mutate: requests(corev1.ResourceList{corev1.ResourceCPU: q("1000m")})},
		"resource names": {reason: "not a standard resource for containers, not an extended resource name",
			mutate: requests(corev1.ResourceList{"bogus.resource": q("1"), "pods": q("1"), "a/b/c": q("1"), "kubernetes.io/foo": q("1")}),
			want: []string{
				c0 + `.resources.requests[a/b/c]: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
				c0 + `.resources.requests[bogus.resource]: Invalid value: "bogus.resource": must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or an extended resource with a domain, such as example.com/gpu`,
				c0 + `.resources.requests[pods]: Invalid value: "pods": must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or an extended resource with a domain, such as example.com/gpu`,
			}},
		"GPU request without a limit": {reason: "an extended resource cannot be overcommitted",
			mutate: requests(corev1.ResourceList{"example.com/gpu": q("1")}),
			want:   []string{c0 + ".resources.limits[example.com/gpu]: Required value: example.com/gpu cannot be overcommitted: its request needs a limit, equal to it (a limit alone is also the request)"}},
		"GPU limit alone": {reason: "the limit is also the request", mutate: limits(corev1.ResourceList{"example.com/gpu": q("1")})},
		"GPU request below its limit": {reason: "request and limit are equal",
			mutate: func(s *corev1.PodSpec) {
				requests(corev1.ResourceList{"example.com/gpu": q("1")})(s)
				limits(corev1.ResourceList{"example.com/gpu": q("2")})(s)
			},
			want: []string{c0 + `.resources.requests[example.com/gpu]: Invalid value: "1": must be equal to example.com/gpu limit of 2`}},
		"GPU fraction": {reason: "devices are whole", mutate: limits(corev1.ResourceList{"example.com/gpu": q("500m")}),
			want: []string{c0 + `.resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer: example.com/gpu is counted in whole devices`}},
		"huge pages": {reason: "whole pages, beside cpu or memory",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{"hugepages-2Mi": q("3Mi")}}
			},
			want: []string{
				c0 + `.resources: Forbidden: HugePages require cpu or memory`,
				c0 + `.resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`,
			}},

		"mount of no volume": {reason: "a mount names a volume of the Pod", mutate: mount(func(m *corev1.VolumeMount) { m.Name = "nothing" }),
			want: []string{c0 + `.volumeMounts[0].name: Not found: "nothing": no volume of the Pod has this name: add it to spec.podTemplate.spec.volumes or spec.volumeClaimTemplates`}},
		"mount without a name": {reason: "a mount names a volume", mutate: mount(func(m *corev1.VolumeMount) { m.Name = "" }),
			want: []string{c0 + ".volumeMounts[0].name: Required value: the name of the volume to mount"}},
		"mount of a volume claim template": {reason: "the render adds a volume for each", mutate: mount(func(m *corev1.VolumeMount) { m.Name = "data" })},
		"mount paths": {reason: "a path once per container; subPath relative, without '..', not with subPathExpr",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts,
					corev1.VolumeMount{Name: "data", MountPath: "/work", SubPath: "../x"},
					corev1.VolumeMount{Name: "data", MountPath: "/a", SubPath: "/x", SubPathExpr: "$(X)"})
			},
			want: []string{
				c0 + `.volumeMounts[1].mountPath: Invalid value: "/work": must be unique`,
				c0 + `.volumeMounts[1].subPath: Invalid value: "../x": must not contain '..'`,
				c0 + `.volumeMounts[2].subPath: Invalid value: "/x": must be a relative path`,
				c0 + `.volumeMounts[2].subPathExpr: Invalid value: "$(X)": subPathExpr and subPath are mutually exclusive`,
			}},
		"mount propagation": {reason: "Bidirectional only when privileged; recursiveReadOnly only read-only",
			mutate: mount(func(m *corev1.VolumeMount) {
				m.MountPropagation = ptr.To(corev1.MountPropagationBidirectional)
				m.RecursiveReadOnly = ptr.To(corev1.RecursiveReadOnlyEnabled)
			}),
			want: []string{
				c0 + ".volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
				c0 + ".volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None or not specified",
				c0 + ".volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when readOnly is true",
			}},

		"restartPolicy Sometimes": {reason: "Always, OnFailure or Never", mutate: func(s *corev1.PodSpec) { s.RestartPolicy = "Sometimes" },
			want: []string{`spec.podTemplate.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`}},
		"toleration operator and effect": {reason: "Equal or Exists; NoSchedule, PreferNoSchedule or NoExecute",
			mutate: toleration(corev1.Toleration{Key: "k", Operator: "Bogus", Effect: "Sometimes"}),
			want: []string{
				`spec.podTemplate.spec.tolerations[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
				`spec.podTemplate.spec.tolerations[0].operator: Unsupported value: "Bogus": supported values: "Equal", "Exists"`,
			}},
		"toleration Lt": {reason: "behind an alpha feature gate, off by default", mutate: toleration(corev1.Toleration{Key: "k", Operator: corev1.TolerationOpLt, Value: "5"}),
			want: []string{`spec.podTemplate.spec.tolerations[0].operator: Unsupported value: "Lt": supported values: "Equal", "Exists"`}},
		"toleration key": {reason: "a label name", mutate: toleration(corev1.Toleration{Key: "bad key", Operator: corev1.TolerationOpExists}),
			want: []string{`spec.podTemplate.spec.tolerations[0].key: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
		"toleration Exists with a value": {reason: "Exists matches any value", mutate: toleration(corev1.Toleration{Operator: corev1.TolerationOpExists, Value: "x"}),
			want: []string{`spec.podTemplate.spec.tolerations[0].value: Invalid value: "x": value must be empty when ` + "`operator`" + ` is 'Exists'`}},
		"toleration without a key": {reason: "only Exists matches every key; tolerationSeconds only with NoExecute",
			mutate: toleration(corev1.Toleration{Value: "v", TolerationSeconds: ptr.To[int64](5)}),
			want: []string{
				`spec.podTemplate.spec.tolerations[0].effect: Invalid value: "": effect must be 'NoExecute' when ` + "`tolerationSeconds`" + ` is set`,
				`spec.podTemplate.spec.tolerations[0].operator: Invalid value: "": operator must be Exists when ` + "`key`" + ` is empty, which means "match all values and all keys"`,
			}},
		"toleration of everything": {reason: "no key, Exists", mutate: toleration(corev1.Toleration{Operator: corev1.TolerationOpExists})},
		"security contexts": {reason: "IDs 0-2147483647; privileged only with escalation; Unmasked only in a user namespace; a seccomp type",
			mutate: func(s *corev1.PodSpec) {
				s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](-1), FSGroup: ptr.To[int64](-1), SupplementalGroups: []int64{-1},
					FSGroupChangePolicy: ptr.To(corev1.PodFSGroupChangePolicy("Sometimes")), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}}
				s.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: ptr.To[int64](-1), AllowPrivilegeEscalation: ptr.To(false),
					Privileged: ptr.To(true), ProcMount: ptr.To(corev1.UnmaskedProcMount), SeccompProfile: &corev1.SeccompProfile{LocalhostProfile: ptr.To("p")}}
			},
			want: []string{
				c0 + ".securityContext.allowPrivilegeEscalation: Invalid value: false: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
				c0 + `.securityContext.procMount: Invalid value: "Unmasked": ` + "`hostUsers`" + ` must be false to use ` + "`Unmasked`",
				c0 + ".securityContext.runAsGroup: Invalid value: -1: must be between 0 and 2147483647, inclusive",
				c0 + `.securityContext.seccompProfile.localhostProfile: Invalid value: "p": can only be set when seccomp type is Localhost`,
				c0 + `.securityContext.seccompProfile.type: Required value: supported values: "Localhost", "RuntimeDefault", "Unconfined"`,
				`spec.podTemplate.spec.securityContext.fsGroup: Invalid value: -1: must be between 0 and 2147483647, inclusive`,
				`spec.podTemplate.spec.securityContext.fsGroupChangePolicy: Unsupported value: "Sometimes": supported values: "OnRootMismatch", "Always"`,
				`spec.podTemplate.spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive`,
				`spec.podTemplate.spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost`,
				`spec.podTemplate.spec.securityContext.supplementalGroups[0]: Invalid value: -1: must be between 0 and 2147483647, inclusive`,
			}},
		"activeDeadlineSeconds -5": {reason: "1 or more", mutate: func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptr.To[int64](-5) },
			want: []string{"spec.podTemplate.spec.activeDeadlineSeconds: Invalid value: -5: must be between 1 and 2147483647, inclusive"}},
		"hostname and subdomain": {reason: "DNS-1123 labels",
			mutate: func(s *corev1.PodSpec) { s.Hostname, s.Subdomain = "Bad_Host", "a.b" },
			want: []string{
				`spec.podTemplate.spec.hostname: Invalid value: "Bad_Host": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
				`spec.podTemplate.spec.subdomain: Invalid value: "a.b": must not contain dots`,
			}},
		"hostname and subdomain valid": {reason: "labels", mutate: func(s *corev1.PodSpec) { s.Hostname, s.Subdomain = "my-host", "svc" }},
		"terminationGracePeriodSeconds -1": {reason: "the Pod's defaults make it 1",
			mutate: func(s *corev1.PodSpec) { s.TerminationGracePeriodSeconds = ptr.To[int64](-1) }},
		"names and DNS": {reason: "names of other objects are DNS subdomains; dnsPolicy None needs nameservers; enums",
			mutate: func(s *corev1.PodSpec) {
				s.ServiceAccountName, s.NodeName, s.PriorityClassName = "Bad_SA", "Bad_Node", "Bad_Class"
				s.RuntimeClassName = ptr.To("")
				s.DNSPolicy = corev1.DNSNone
				s.DNSConfig = &corev1.PodDNSConfig{}
				s.NodeSelector = map[string]string{"bad key": "x"}
				s.OS = &corev1.PodOS{Name: "plan9"}
				s.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy(""))
			},
			want: []string{
				`spec.podTemplate.spec.dnsConfig.nameservers: Required value: dnsPolicy None needs at least one nameserver`,
				`spec.podTemplate.spec.nodeName: Invalid value: "Bad_Node": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				`spec.podTemplate.spec.nodeSelector: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`spec.podTemplate.spec.os.name: Unsupported value: "plan9": supported values: "linux", "windows"`,
				`spec.podTemplate.spec.preemptionPolicy: Required value: PreemptLowerPriority or Never; leave it out for the priority class's`,
				`spec.podTemplate.spec.priorityClassName: Invalid value: "Bad_Class": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				`spec.podTemplate.spec.runtimeClassName: Invalid value: "": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				`spec.podTemplate.spec.serviceAccountName: Invalid value: "Bad_SA": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			}},
		"host network and ports": {reason: "under hostNetwork a hostPort is the containerPort; one host port once",
			mutate: func(s *corev1.PodSpec) {
				s.HostNetwork = true
				s.Containers[0].Ports = append(s.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 80, HostPort: 81})
				s.Containers = append(s.Containers, corev1.Container{Name: "b", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}})
			},
			want: []string{
				c0 + ".ports[1].hostPort: Invalid value: 81: must match `containerPort` when `hostNetwork` is true",
				`spec.podTemplate.spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8888"`,
			}},
		"probes and hooks": {reason: "one handler; thresholds; readiness without a grace period; a sleep within the Pod's",
			mutate: func(s *corev1.PodSpec) {
				c := &s.Containers[0]
				c.LivenessProbe = &corev1.Probe{SuccessThreshold: 2, PeriodSeconds: -1}
				c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(0), Scheme: "FTP"},
					Exec: &corev1.ExecAction{}}, TerminationGracePeriodSeconds: ptr.To[int64](5)}
				c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 60}}, PostStart: &corev1.LifecycleHandler{}}
			},
			want: []string{
				c0 + ".lifecycle.postStart: Required value: must specify a handler type: exec, httpGet, tcpSocket or sleep",
				c0 + ".lifecycle.preStop.sleep.seconds: Invalid value: 60: must be non-negative and less than terminationGracePeriodSeconds (30)",
				c0 + ".livenessProbe: Required value: must specify a handler type: exec, httpGet, tcpSocket or grpc",
				c0 + ".livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
				c0 + ".livenessProbe.successThreshold: Invalid value: 2: must be 1",
				c0 + ".readinessProbe.exec.command: Required value: the command to run",
				c0 + ".readinessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
				c0 + ".readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
			}},
		"init containers": {reason: "probes only on a sidecar",
			mutate: func(s *corev1.PodSpec) {
				probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
				s.InitContainers = []corev1.Container{
					{Name: "init", Image: "i", LivenessProbe: probe},
					{Name: "sidecar", Image: "i", LivenessProbe: probe, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
				}
			},
			want: []string{"spec.podTemplate.spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"}},
		"container enums": {reason: "imagePullPolicy and terminationMessagePolicy",
			mutate: func(s *corev1.PodSpec) {
				s.Containers[0].ImagePullPolicy, s.Containers[0].TerminationMessagePolicy = "Sometimes", "Bogus"
			},
			want: []string{
				c0 + `.imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"`,
				c0 + `.terminationMessagePolicy: Unsupported value: "Bogus": supported values: "File", "FallbackToLogsOnError"`,
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pt := valid()
			tc.mutate(&pt.Spec)
			got := errorStrings(ValidatePodTemplate(pt, vcts, field.NewPath("spec", "podTemplate")))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
