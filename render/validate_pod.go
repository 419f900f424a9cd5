package render

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// The checks in this file, validate_podspec.go and validate_container.go are the API server's own
// rules for what the render turns into objects, so that a render that succeeds is one the API
// server accepts. apimachinery's label, annotation
// and selector validation is imported; the Pod and NetworkPolicy rules live in k8s.io/kubernetes
// (pkg/apis/core/validation, pkg/apis/networking/validation), which is not importable, so the
// rules are written here and each cites the one it follows.

// ValidatePodTemplate checks a Sandbox's (or template's) pod template for what would make the
// Pod the render emits impossible to create. The rules are those of the API server's Pod
// validation on create (k8s.io/kubernetes pkg/apis/core/validation ValidatePodCreate, v1.37)
// applied to what the API server validates, the template after the v1 defaults: an empty
// restartPolicy is Always by then, a limit without a request is also the request. It checks
// labels and annotations (apimachinery's own validation), the Pod's own fields
// (validatePodSpec), the containers (validateContainers) and the volumes' names. vcts are the
// volume claim templates whose volumes the render adds to the Pod, which a mount may name.
//
// Left to the API server, which refuses them with its own message: volume sources, affinity,
// topology spread constraints, resource claims and pod-level resources, sysctls, AppArmor and
// Windows options, container restart rules and resize policies, and what depends on the
// cluster's flags or objects (privileged containers, priority classes, RuntimeClasses).
func ValidatePodTemplate(pt *agentsv1beta1.PodTemplate, vcts []agentsv1beta1.PersistentVolumeClaimTemplate, path *field.Path) field.ErrorList {
	md, spec := path.Child("metadata"), path.Child("spec")
	errs := metav1validation.ValidateLabels(pt.ObjectMeta.Labels, md.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(pt.ObjectMeta.Annotations, md.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&pt.Spec, spec)...)
	errs = append(errs, validateContainers(&pt.Spec, podVolumes(&pt.Spec, vcts), spec)...)
	errs = append(errs, validateVolumeNames(pt.Spec.Volumes, spec.Child("volumes"))...)
	return SortErrors(errs)
}

// podVolumes are the volumes of the Pod the render makes of spec, by name: spec's own and one
// for each volume claim template (mergeVolumeClaimVolumes). The value says whether the volume is
// an emptyDir (an env var's fileKeyRef reads only those).
func podVolumes(spec *corev1.PodSpec, vcts []agentsv1beta1.PersistentVolumeClaimTemplate) map[string]bool {
	out := make(map[string]bool, len(spec.Volumes)+len(vcts))
	for i := range spec.Volumes {
		out[spec.Volumes[i].Name] = spec.Volumes[i].EmptyDir != nil
	}
	for i := range vcts {
		out[vcts[i].Name] = false
	}
	return out
}

// validateVolumeNames follows k8s.io/kubernetes pkg/apis/core/validation ValidateVolumes: every
// volume has a name, a DNS-1123 label unique among the Pod's volumes (the schema's list map
// reports the repeats).
func validateVolumeNames(volumes []corev1.Volume, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range volumes {
		p := path.Index(i).Child("name")
		if volumes[i].Name == "" {
			errs = append(errs, field.Required(p, "every volume needs a name"))
			continue
		}
		for _, msg := range validation.IsDNS1123Label(volumes[i].Name) {
			errs = append(errs, field.Invalid(p, volumes[i].Name, msg))
		}
	}
	return errs
}

// validateContainers follows k8s.io/kubernetes pkg/apis/core/validation validateContainers,
// validateInitContainers and validateContainerCommon: a name is required, a DNS-1123 label, and
// unique among all containers and init containers of the Pod; a Pod's container needs an image
// without leading or trailing whitespace; the enums of terminationMessagePolicy and
// imagePullPolicy; the ports (validatePort, and no two containers on one host port: an init
// container only with itself, as init containers run one by one); the environment, mounts,
// resources, security context, probes and lifecycle (validate_container.go). An init container
// has probes and a lifecycle only as a sidecar (restartPolicy: Always).
func validateContainers(spec *corev1.PodSpec, volumes map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]*field.Path{}
	hostPorts := map[string]bool{}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
		if grace < 0 {
			grace = 1 // as the Pod's defaults make it
		}
	}
	hostUsers := spec.HostUsers == nil || *spec.HostUsers
	check := func(list string, cs []corev1.Container) {
		for i := range cs {
			c := &cs[i]
			p := path.Child(list).Index(i)
			errs = append(errs, validateContainerIdentity(c, p, names)...)
			if list == "initContainers" {
				clear(hostPorts)
			}
			// The paths of the fields below are made only for the fields a container has: a
			// render validates every Pod it makes.
			if len(c.Ports) > 0 {
				ports := p.Child("ports")
				portNames := map[string]*field.Path{} // unique per container; across containers only a warning
				for j := range c.Ports {
					pp := ports.Index(j)
					errs = append(errs, validatePort(&c.Ports[j], pp, portNames)...)
					errs = append(errs, validateHostPort(spec, &c.Ports[j], pp, hostPorts)...)
				}
			}
			if len(c.Env) > 0 {
				errs = append(errs, validateEnv(c.Env, volumes, p.Child("env"))...)
			}
			if len(c.EnvFrom) > 0 {
				errs = append(errs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
			}
			if len(c.VolumeMounts) > 0 {
				errs = append(errs, validateVolumeMounts(c, volumes, p.Child("volumeMounts"))...)
			}
			errs = append(errs, validateResources(&c.Resources, p, "resources")...)
			if c.SecurityContext != nil {
				errs = append(errs, validateSecurityContext(c.SecurityContext, hostUsers, p.Child("securityContext"))...)
			}
			sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
			if list == "initContainers" && !sidecar {
				errs = append(errs, forbidInInitContainer(c, p)...)
				continue
			}
			errs = append(errs, validateContainerHandlers(c, grace, p)...)
		}
	}
	check("initContainers", spec.InitContainers)
	clear(hostPorts)
	check("containers", spec.Containers)
	return errs
}

// validateContainerIdentity checks a container's name (required, a DNS-1123 label, unique among
// names, which it records), its image and its two enums.
func validateContainerIdentity(c *corev1.Container, p *field.Path, names map[string]*field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Name == "":
		errs = append(errs, field.Required(p.Child("name"), "every container needs a name"))
	case names[c.Name] != nil:
		errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
	default:
		names[c.Name] = p
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
	}
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), "the render turns the template into a Pod, and a Pod's container needs an image"))
	} else if strings.TrimSpace(c.Image) != c.Image {
		// validateContainersOnlyForPod: no leading or trailing whitespace.
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, validateEnum(c.TerminationMessagePolicy, p, "terminationMessagePolicy",
		corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError)...)
	errs = append(errs, validateEnum(c.ImagePullPolicy, p, "imagePullPolicy", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)...)
	return errs
}

// validateContainerHandlers checks a container's lifecycle hooks (against the Pod's termination
// grace period) and its probes.
func validateContainerHandlers(c *corev1.Container, grace int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Lifecycle != nil {
		errs = append(errs, validateHandler(lifecycleHandler(c.Lifecycle.PostStart), grace, p.Child("lifecycle", "postStart"))...)
		errs = append(errs, validateHandler(lifecycleHandler(c.Lifecycle.PreStop), grace, p.Child("lifecycle", "preStop"))...)
	}
	for _, probe := range []struct {
		kind  probeKind
		name  string
		probe *corev1.Probe
	}{{livenessProbe, "livenessProbe", c.LivenessProbe}, {readinessProbe, "readinessProbe", c.ReadinessProbe}, {startupProbe, "startupProbe", c.StartupProbe}} {
		if probe.probe != nil {
			errs = append(errs, validateProbe(probe.probe, probe.kind, p.Child(probe.name))...)
		}
	}
	return errs
}

// validateHostPort follows validatePodHostNetworkDeps and checkHostPortConflicts: under
// hostNetwork a hostPort is the containerPort (the Pod's defaults set it when it is 0), and no
// two ports take one host port, protocol and host IP.
func validateHostPort(spec *corev1.PodSpec, port *corev1.ContainerPort, p *field.Path, taken map[string]bool) field.ErrorList {
	var errs field.ErrorList
	hp := port.HostPort
	if spec.HostNetwork {
		if hp != 0 && hp != port.ContainerPort {
			errs = append(errs, field.Invalid(p.Child("hostPort"), hp, "must match `containerPort` when `hostNetwork` is true"))
		}
		if hp == 0 {
			hp = port.ContainerPort
		}
	}
	if hp == 0 {
		return errs
	}
	key := fmt.Sprintf("%s/%s/%d", cmp.Or(port.Protocol, corev1.ProtocolTCP), port.HostIP, hp)
	if taken[key] {
		errs = append(errs, field.Duplicate(p.Child("hostPort"), key))
	}
	taken[key] = true
	return errs
}

// forbidInInitContainer: an init container that is not a sidecar runs to completion before the
// others start, so it has no probes and no lifecycle hooks.
func forbidInInitContainer(c *corev1.Container, p *field.Path) field.ErrorList {
	const why = "may not be set for init containers without restartPolicy=Always"
	var errs field.ErrorList
	if c.Lifecycle != nil {
		errs = append(errs, field.Forbidden(p.Child("lifecycle"), why))
	}
	for _, probe := range []struct {
		name string
		set  bool
	}{{"livenessProbe", c.LivenessProbe != nil}, {"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}} {
		if probe.set {
			errs = append(errs, field.Forbidden(p.Child(probe.name), why))
		}
	}
	return errs
}

// validateEnum refuses a value of the field name of parent outside supported; the empty value
// is what the Pod's defaults replace, and is accepted. The field's path is made only for an
// error: a render validates every Pod it makes.
func validateEnum[T ~string](v T, parent *field.Path, name string, supported ...T) field.ErrorList {
	if v == "" || slices.Contains(supported, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(parent.Child(name), v, supported)}
}

func validatePort(port *corev1.ContainerPort, p *field.Path, names map[string]*field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Name != "" {
		for _, msg := range validation.IsValidPortName(port.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
		}
		if prev := names[port.Name]; prev != nil {
			errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
		}
		names[port.Name] = p
	}
	if port.ContainerPort == 0 {
		errs = append(errs, field.Required(p.Child("containerPort"), ""))
	} else {
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
		}
	}
	if port.HostPort != 0 {
		for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
			errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
		}
	}
	errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
	return errs
}

var protocols = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}

func validateProtocol(proto corev1.Protocol, p *field.Path) field.ErrorList {
	if proto == "" || slices.Contains(protocols, proto) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, proto, protocols)}
}

// validateNetworkPolicyRules checks a template's custom NetworkPolicy rules as k8s.io/kubernetes
// pkg/apis/networking/validation does (ValidateNetworkPolicyPort, ValidateNetworkPolicyPeer,
// ValidateIPBlock): a port is a number in 1-65535 or an IANA_SVC_NAME, endPort only with a
// numeric port and not below it, protocol TCP, UDP or SCTP; a peer is an ipBlock or selectors,
// not both and not neither; an ipBlock's cidr is a valid CIDR and each except entry a valid CIDR
// strictly inside it; selectors are valid label selectors.
func validateNetworkPolicyRules(np *extv1beta1.NetworkPolicySpec, path *field.Path) field.ErrorList {
	if np == nil {
		return nil
	}
	var errs field.ErrorList
	for i, r := range np.Ingress {
		p := path.Child("ingress").Index(i)
		errs = append(errs, validateNPPorts(r.Ports, p.Child("ports"))...)
		for j := range r.From {
			errs = append(errs, validateNPPeer(&r.From[j], p.Child("from").Index(j))...)
		}
	}
	for i, r := range np.Egress {
		p := path.Child("egress").Index(i)
		errs = append(errs, validateNPPorts(r.Ports, p.Child("ports"))...)
		for j := range r.To {
			errs = append(errs, validateNPPeer(&r.To[j], p.Child("to").Index(j))...)
		}
	}
	return SortErrors(errs)
}

func validateNPPorts(ports []networkingv1.NetworkPolicyPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		p := path.Index(i)
		if port.Protocol != nil {
			errs = append(errs, validateProtocol(*port.Protocol, p.Child("protocol"))...)
		}
		if port.Port == nil {
			if port.EndPort != nil {
				errs = append(errs, field.Required(p.Child("port"), "endPort needs a numeric port"))
			}
			continue
		}
		if port.Port.Type == intstr.Int {
			for _, msg := range validation.IsValidPortNum(int(port.Port.IntVal)) {
				errs = append(errs, field.Invalid(p.Child("port"), port.Port.IntVal, msg))
			}
			if port.EndPort != nil {
				if *port.EndPort < port.Port.IntVal {
					errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "must be greater than or equal to port"))
				}
				for _, msg := range validation.IsValidPortNum(int(*port.EndPort)) {
					errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, msg))
				}
			}
			continue
		}
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when port is not a number"))
		}
		for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port.StrVal, msg))
		}
	}
	return errs
}

func validateNPPeer(peer *networkingv1.NetworkPolicyPeer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	selectors := peer.PodSelector != nil || peer.NamespaceSelector != nil
	switch {
	case peer.IPBlock != nil && selectors:
		errs = append(errs, field.Forbidden(p, "an ipBlock cannot be combined with podSelector or namespaceSelector; write two peers"))
	case peer.IPBlock == nil && !selectors:
		errs = append(errs, field.Required(p, "a peer needs an ipBlock, a podSelector or a namespaceSelector"))
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts, p.Child("podSelector"))...)
	errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	if b := peer.IPBlock; b != nil {
		bp := p.Child("ipBlock")
		var cidr netip.Prefix
		if b.CIDR == "" {
			errs = append(errs, field.Required(bp.Child("cidr"), ""))
		} else if cerrs := validation.IsValidCIDRForLegacyField(bp.Child("cidr"), b.CIDR, true, nil); len(cerrs) > 0 {
			errs = append(errs, cerrs...)
		} else {
			cidr = netip.MustParsePrefix(b.CIDR)
		}
		for i, ex := range b.Except {
			ep := bp.Child("except").Index(i)
			if eerrs := validation.IsValidCIDRForLegacyField(ep, ex, true, nil); len(eerrs) > 0 {
				errs = append(errs, eerrs...)
				continue
			}
			e := netip.MustParsePrefix(ex)
			if cidr.IsValid() && (e.Addr().Is4() != cidr.Addr().Is4() || e.Bits() <= cidr.Bits() || !cidr.Contains(e.Addr())) {
				errs = append(errs, field.Invalid(ep, ex, "must be a strict subset of cidr "+b.CIDR))
			}
		}
	}
	return errs
}

// SortErrors orders field errors by field, type, detail and value: apimachinery's label and
// annotation checks range over maps, and the same input must always report the same errors in
// the same order.
func SortErrors(errs field.ErrorList) field.ErrorList {
	slices.SortStableFunc(errs, func(a, b *field.Error) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Detail, b.Detail),
			cmp.Compare(fmt.Sprint(a.BadValue), fmt.Sprint(b.BadValue)))
	})
	return errs
}
