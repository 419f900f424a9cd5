package render

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// ServiceMode is what a Sandbox's spec.service asks of its headless Service. Upstream's three
// states are not "present or absent": nil keeps a Service that already exists.
type ServiceMode int

const (
	// serviceKeep (spec.service unset) never creates a Service but keeps, and fixes the labels
	// and selector of, one the Sandbox already owns. Its ports are left alone.
	serviceKeep ServiceMode = iota
	// serviceApply (spec.service: true) creates the Service and keeps it exactly as rendered.
	serviceApply
	// serviceDelete (spec.service: false) deletes a Service the Sandbox owns.
	serviceDelete
)

// SandboxChildren is everything one Sandbox implies.
type SandboxChildren struct {
	// Pod is the desired Pod, or nil when the Sandbox is suspended. Upstream never updates the
	// spec of an existing Pod (issues #581, #612): a controller creates Pod as rendered and
	// afterwards only syncs its metadata (see syncPodMetadata).
	Pod *corev1.Pod
	// PVCs are created once and never updated or deleted by the controller; they outlive
	// suspension and Retain expiry and go with the Sandbox.
	PVCs []*corev1.PersistentVolumeClaim
	// Service is the desired headless Service. It is always computed so a controller can fix the
	// drift of a kept Service; whether it should exist is ServiceMode.
	Service     *corev1.Service
	ServiceMode ServiceMode
	// NetworkPolicy is the policy of the standalone-network-policy pack, if it applies.
	NetworkPolicy *networkingv1.NetworkPolicy
}

// Objects lists the children a declarative render emits: the Pod when running, every PVC, and
// the Service only when spec.service is true.
func (c *SandboxChildren) Objects() []Object {
	var out []Object
	if c.Pod != nil {
		out = append(out, c.Pod)
	}
	for _, p := range c.PVCs {
		out = append(out, p)
	}
	if c.ServiceMode == serviceApply {
		out = append(out, c.Service)
	}
	if c.NetworkPolicy != nil {
		out = append(out, c.NetworkPolicy)
	}
	return out
}

// Sandbox renders the children of one defaulted v1beta1 Sandbox. Owner references are written
// when the Sandbox carries a UID (a controller render) and omitted when it does not (a GitOps
// render). The policy packs apply to its Pod. Invalid input returns an *InvalidError and no
// children.
func Sandbox(sb *agentsv1beta1.Sandbox, opts Options) (*SandboxChildren, error) {
	return renderSandbox(sb, makerOf(sb), opts)
}

// sandboxMaker is the kind of object that made, and controls, a Sandbox: a claim, a warm pool,
// or nobody. It decides which extension labels reach the Pod. A controller's render reads it from
// the owner reference; a GitOps render, which has no UIDs and so no owner references, knows it
// because it made the Sandbox itself.
type sandboxMaker struct{ group, kind string }

func makerOf(sb *agentsv1beta1.Sandbox) sandboxMaker {
	ref := metav1.GetControllerOfNoCopy(sb)
	if ref == nil {
		return sandboxMaker{}
	}
	group, kind := groupKindOf(ref)
	return sandboxMaker{group, kind}
}

func (c sandboxMaker) isExtension() bool { return c.group == extv1beta1.GroupVersion.Group }

func renderSandbox(sb *agentsv1beta1.Sandbox, ctrl sandboxMaker, opts Options) (*SandboxChildren, error) {
	invalid := func(errs field.ErrorList) error {
		return &InvalidError{Kind: agentsv1beta1.SandboxKind, Namespace: sb.Namespace, Name: sb.Name, Errs: errs}
	}
	if errs := ValidateSandbox(sb); len(errs) > 0 {
		return nil, invalid(errs)
	}
	podSpec := sb.Spec.PodTemplate.Spec.DeepCopy()
	packs := opts.Policies.Packs
	if !ctrl.isExtension() {
		// Sandboxes made from templates had the packs applied to their pod template already,
		// and violations reported on the template.
		if errs := packs.ApplyPod(podSpec, field.NewPath("spec", "podTemplate", "spec")); len(errs) > 0 {
			return nil, invalid(errs)
		}
		if packs.StandaloneNetworkPolicy {
			opts.Policies.NetworkPolicy.PublicDNS(podSpec, true)
		}
	}
	hash := NameHash(sb.Name)
	c := &SandboxChildren{
		Service:     sandboxService(sb, hash),
		ServiceMode: serviceMode(sb.Spec.Service),
	}
	for i := range sb.Spec.VolumeClaimTemplates {
		c.PVCs = append(c.PVCs, sandboxPVC(sb, &sb.Spec.VolumeClaimTemplates[i], hash))
	}
	if sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
		c.Pod = sandboxPod(sb, podSpec, ctrl, hash)
	}
	if packs.StandaloneNetworkPolicy && !ctrl.isExtension() {
		c.NetworkPolicy = standaloneNetworkPolicy(sb, hash, opts)
	}
	return c, nil
}

// StandaloneNetworkPolicyName is the name of the policy the standalone-network-policy pack gives
// a hand-written Sandbox; the prefix keeps it apart from a template's <template>-network-policy.
func StandaloneNetworkPolicyName(sandbox string) string {
	return standalonePolicyPrefix + sandbox + networkPolicySuffix
}

const standalonePolicyPrefix, networkPolicySuffix = "sandbox-", "-network-policy"

// StandaloneNetworkPolicyOf is the Sandbox whose standalone NetworkPolicy has that name
// (StandaloneNetworkPolicyName's inverse); false for a name it never gives.
func StandaloneNetworkPolicyOf(policy string) (string, bool) {
	name, ok := strings.CutPrefix(policy, standalonePolicyPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(name, networkPolicySuffix)
}

func standaloneNetworkPolicy(sb *agentsv1beta1.Sandbox, hash string, opts Options) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            StandaloneNetworkPolicyName(sb.Name),
			Namespace:       sb.Namespace,
			Labels:          map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
			OwnerReferences: sandboxOwnerRefs(sb),
		},
		Spec: opts.Policies.NetworkPolicy.DefaultSpec(map[string]string{agentsv1beta1.SandboxNameHashLabel: hash}),
	}
}

func serviceMode(b *bool) ServiceMode {
	switch {
	case b == nil:
		return serviceKeep
	case *b:
		return serviceApply
	default:
		return serviceDelete
	}
}

// PVCName is the name upstream gives the PVC of a volume claim template: template name first,
// like a StatefulSet.
func PVCName(template, sandbox string) string {
	return template + "-" + sandbox
}

func sandboxPod(sb *agentsv1beta1.Sandbox, spec *corev1.PodSpec, ctrl sandboxMaker, hash string) *corev1.Pod {
	labels, annotations := podMetadata(sb, ctrl)
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            sb.Name,
			Namespace:       sb.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: sandboxOwnerRefs(sb),
		},
		Spec: *spec,
	}
	pod.Spec.Volumes = mergeVolumeClaimVolumes(pod.Spec.Volumes, sb)
	return pod
}

// PodMetadata is the labels and annotations upstream puts on a Sandbox's Pod: the non-system
// template labels, the name hash, the extension labels, the normalised created-by, the non-system
// template annotations, and the two bookkeeping annotations that list which keys came from the
// template (so a later sync can delete the ones the template dropped).
func PodMetadata(sb *agentsv1beta1.Sandbox) (labels, annotations map[string]string) {
	return podMetadata(sb, makerOf(sb))
}

func podMetadata(sb *agentsv1beta1.Sandbox, ctrl sandboxMaker) (labels, annotations map[string]string) {
	labels = map[string]string{}
	annotations = map[string]string{}
	var propagatedLabels, propagatedAnnotations []string
	for k, v := range sb.Spec.PodTemplate.ObjectMeta.Labels {
		if isSystemKey(k) {
			continue
		}
		labels[k] = v
		propagatedLabels = append(propagatedLabels, k)
	}
	labels[agentsv1beta1.SandboxNameHashLabel] = NameHash(sb.Name)
	for k, v := range extensionPodLabels(sb, ctrl) {
		labels[k] = v
	}
	if v := sb.Labels[agentsv1beta1.CreatedByLabel]; v != "" {
		labels[agentsv1beta1.CreatedByLabel] = normalizeCreatedBy(v)
	}
	for k, v := range sb.Spec.PodTemplate.ObjectMeta.Annotations {
		if isSystemAnnotation(k) {
			continue
		}
		annotations[k] = v
		propagatedAnnotations = append(propagatedAnnotations, k)
	}
	if len(propagatedLabels) > 0 {
		annotations[agentsv1beta1.SandboxPropagatedLabelsAnnotation] = sortedKeys(propagatedLabels)
	}
	if len(propagatedAnnotations) > 0 {
		annotations[agentsv1beta1.SandboxPropagatedAnnotationsAnnotation] = sortedKeys(propagatedAnnotations)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	return labels, annotations
}

// mergeVolumeClaimVolumes applies StatefulSet semantics: a volume claim template replaces a pod
// volume of the same name, the other pod volumes keep their order, and the claim volumes come last
// in template order.
func mergeVolumeClaimVolumes(volumes []corev1.Volume, sb *agentsv1beta1.Sandbox) []corev1.Volume {
	vcts := sb.Spec.VolumeClaimTemplates
	if len(vcts) == 0 {
		return volumes
	}
	replaced := make(map[string]bool, len(vcts))
	for i := range vcts {
		replaced[vcts[i].Name] = true
	}
	out := make([]corev1.Volume, 0, len(volumes)+len(vcts))
	for _, v := range volumes {
		if !replaced[v.Name] {
			out = append(out, v)
		}
	}
	for i := range vcts {
		out = append(out, corev1.Volume{
			Name: vcts[i].Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: PVCName(vcts[i].Name, sb.Name),
			}},
		})
	}
	return out
}

func sandboxPVC(sb *agentsv1beta1.Sandbox, t *agentsv1beta1.PersistentVolumeClaimTemplate, hash string) *corev1.PersistentVolumeClaim {
	labels := make(map[string]string, len(t.Labels)+1)
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[agentsv1beta1.SandboxNameHashLabel] = hash
	var annotations map[string]string
	if len(t.Annotations) > 0 {
		annotations = make(map[string]string, len(t.Annotations))
		for k, v := range t.Annotations {
			annotations[k] = v
		}
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            PVCName(t.Name, sb.Name),
			Namespace:       sb.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: sandboxOwnerRefs(sb),
		},
		Spec: *t.Spec.DeepCopy(),
	}
}

func sandboxService(sb *agentsv1beta1.Sandbox, hash string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            sb.Name,
			Namespace:       sb.Namespace,
			Labels:          map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
			OwnerReferences: sandboxOwnerRefs(sb),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
			Ports:     servicePorts(&sb.Spec.PodTemplate.Spec),
		},
	}
}

// servicePorts derives the headless Service's ports from the pod spec as upstream does: ports of
// the regular containers, then of native sidecars (init containers with restartPolicy Always);
// port 0 skipped; protocol defaulting to TCP; one port per (port, protocol), sorted by port then
// protocol; the first explicit name seen for a key wins unless another key already took that
// name; unnamed ports are called p-<port>-<protocol>, with -2, -3, ... on a clash.
func servicePorts(spec *corev1.PodSpec) []corev1.ServicePort {
	type key struct {
		port     int32
		protocol corev1.Protocol
	}
	var order []key
	names := map[key]string{}
	reserved := map[string]bool{}
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.ContainerPort == 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			k := key{p.ContainerPort, proto}
			if _, seen := names[k]; !seen {
				names[k] = ""
				order = append(order, k)
			}
			if p.Name == "" || names[k] != "" || reserved[p.Name] {
				continue
			}
			names[k] = p.Name
			reserved[p.Name] = true
		}
	}
	for i := range spec.Containers {
		add(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	if len(order) == 0 {
		return nil
	}
	slices.SortFunc(order, func(a, b key) int {
		if c := cmp.Compare(a.port, b.port); c != 0 {
			return c
		}
		return strings.Compare(string(a.protocol), string(b.protocol))
	})
	ports := make([]corev1.ServicePort, 0, len(order))
	for _, k := range order {
		name := names[k]
		if name == "" {
			name = generatedPortName(k.port, k.protocol, reserved)
		}
		reserved[name] = true
		ports = append(ports, corev1.ServicePort{
			Name:       name,
			Protocol:   k.protocol,
			Port:       k.port,
			TargetPort: intstr.FromInt32(k.port),
		})
	}
	return ports
}

func generatedPortName(port int32, protocol corev1.Protocol, reserved map[string]bool) string {
	base := fmt.Sprintf("p-%d-%s", port, strings.ToLower(string(protocol)))
	if !reserved[base] {
		return base
	}
	for n := 2; ; n++ {
		if name := fmt.Sprintf("%s-%d", base, n); !reserved[name] {
			return name
		}
	}
}
