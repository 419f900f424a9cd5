package policies

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config is every policy knob render takes.
type Config struct {
	// NetworkPolicy tunes the secure-default NetworkPolicy and DNS.
	NetworkPolicy NetworkPolicyDefaults `json:"networkPolicy,omitempty"`
	// Packs are the opt-in policy packs.
	Packs Packs `json:"packs,omitempty"`
}

// Packs are opt-in policies applied at render time to the pod spec of every sandbox (templates
// and hand-written Sandboxes). Each sets what is absent and rejects what contradicts it.
type Packs struct {
	// Restricted enforces the Pod Security Standards "restricted" profile.
	Restricted bool `json:"restricted,omitempty"`
	// RestrictedDefaultUser is the UID the restricted pack sets as the pod's runAsUser when
	// neither the pod nor every container names one: runAsNonRoot alone makes the kubelet refuse
	// to start an image whose user is root (python:3.12-slim, most official images). Default
	// DefaultNonRootUser. 0 sets none, and such pods are rejected instead.
	RestrictedDefaultUser *int64 `json:"restrictedDefaultUser,omitempty"`
	// RuntimeClass requires every sandbox pod to use one of a list of RuntimeClasses.
	RuntimeClass *RuntimeClassPack `json:"runtimeClass,omitempty"`
	// StandaloneNetworkPolicy gives every hand-written Sandbox (one no claim or pool controls,
	// which upstream's template policies never select) its own secure-default NetworkPolicy.
	StandaloneNetworkPolicy bool `json:"standaloneNetworkPolicy,omitempty"`
}

// RuntimeClassPack lists the RuntimeClasses sandboxes may use, for example gvisor or kata-qemu.
type RuntimeClassPack struct {
	// Allowed RuntimeClass names; required.
	Allowed []string `json:"allowed"`
	// Default is set on pods that name none; empty means such pods are an error.
	Default string `json:"default,omitempty"`
}

// DefaultNonRootUser is the UID the restricted pack runs pods as when they name none: 65532,
// the nonroot user of the distroless and Chainguard images, owned by no account in most others.
const DefaultNonRootUser int64 = 65532

// Validate checks the configuration; path is where it sits in the caller's configuration.
func (c Config) Validate(path *field.Path) field.ErrorList {
	errs := c.NetworkPolicy.Validate(path.Child("networkPolicy"))
	if u := c.Packs.RestrictedDefaultUser; u != nil && *u < 0 {
		errs = append(errs, field.Invalid(path.Child("packs", "restrictedDefaultUser"), *u, "must be a UID above 0, or 0 to set none"))
	}
	if rc := c.Packs.RuntimeClass; rc != nil {
		p := path.Child("packs", "runtimeClass")
		if len(rc.Allowed) == 0 {
			errs = append(errs, field.Required(p.Child("allowed"), "list the RuntimeClasses sandboxes may use"))
		}
		// A RuntimeClass's name is a DNS-1123 subdomain (as the API server validates it, and a
		// Pod's runtimeClassName): any other allows nothing a Pod can name, and "Bad Name" was
		// taken without a word.
		for i, name := range rc.Allowed {
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(p.Child("allowed").Index(i), name, "not a RuntimeClass name: "+msg))
			}
		}
		if rc.Default != "" && !slices.Contains(rc.Allowed, rc.Default) {
			errs = append(errs, field.NotSupported(p.Child("default"), rc.Default, rc.Allowed))
		}
	}
	return errs
}

// ApplyPod applies the enabled packs to a sandbox pod spec found at path: it sets what is absent
// and returns an error for every field that contradicts a pack. The spec is modified in place.
func (p Packs) ApplyPod(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.Restricted {
		user := DefaultNonRootUser
		if p.RestrictedDefaultUser != nil {
			user = *p.RestrictedDefaultUser
		}
		errs = append(errs, restrict(spec, path, user)...)
	}
	if rc := p.RuntimeClass; rc != nil {
		errs = append(errs, rc.apply(spec, path)...)
	}
	return errs
}

func (rc *RuntimeClassPack) apply(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	p := path.Child("runtimeClassName")
	switch {
	case spec.RuntimeClassName == nil || *spec.RuntimeClassName == "":
		if rc.Default == "" {
			return field.ErrorList{field.Required(p, "runtime-class policy pack: sandbox pods must set one of "+quoteList(rc.Allowed))}
		}
		d := rc.Default
		spec.RuntimeClassName = &d
	case !slices.Contains(rc.Allowed, *spec.RuntimeClassName):
		return field.ErrorList{field.NotSupported(p, *spec.RuntimeClassName, rc.Allowed)}
	}
	return nil
}

const restrictedPrefix = `restricted policy pack (Pod Security Standards "restricted"): `

// restrict enforces the restricted profile: no host namespaces, hostPath volumes, host ports,
// privileged containers, privilege escalation, root users, unconfined seccomp or added
// capabilities beyond NET_BIND_SERVICE; and sets runAsNonRoot, seccomp RuntimeDefault,
// allowPrivilegeEscalation false and drop ALL where absent. runAsNonRoot comes with a non-root
// runAsUser (user, when the pod and some container name none), or the pod is rejected: the
// kubelet refuses to start a container whose image runs as root under runAsNonRoot, and most
// images do.
func restrict(spec *corev1.PodSpec, path *field.Path, user int64) field.ErrorList {
	var errs field.ErrorList
	forbid := func(p *field.Path, msg string) { errs = append(errs, field.Forbidden(p, restrictedPrefix+msg)) }

	if spec.HostNetwork {
		forbid(path.Child("hostNetwork"), "sharing the host network is not allowed")
	}
	if spec.HostPID {
		forbid(path.Child("hostPID"), "sharing the host PID namespace is not allowed")
	}
	if spec.HostIPC {
		forbid(path.Child("hostIPC"), "sharing the host IPC namespace is not allowed")
	}
	for i, v := range spec.Volumes {
		if v.HostPath != nil {
			forbid(path.Child("volumes").Index(i).Child("hostPath"), "hostPath volumes are not allowed")
		}
	}

	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	psc := spec.SecurityContext
	pscPath := path.Child("securityContext")
	switch {
	case psc.RunAsNonRoot == nil:
		t := true
		psc.RunAsNonRoot = &t
	case !*psc.RunAsNonRoot:
		forbid(pscPath.Child("runAsNonRoot"), "must not be false")
	}
	if psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		forbid(pscPath.Child("runAsUser"), "must not be 0 (root)")
	}
	if psc.RunAsUser == nil && !everyContainerHasUser(spec) {
		if user == 0 {
			errs = append(errs, field.Required(pscPath.Child("runAsUser"), restrictedPrefix+
				"runAsNonRoot needs a non-root runAsUser here or on every container: the kubelet refuses to start an image whose user is root, as most images' is; set one, or set the pack's restrictedDefaultUser"))
		} else {
			u := user
			psc.RunAsUser = &u
		}
	}
	switch {
	case psc.SeccompProfile == nil:
		psc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	case psc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined:
		forbid(pscPath.Child("seccompProfile", "type"), "Unconfined is not allowed; use RuntimeDefault or Localhost")
	}

	each := func(list []corev1.Container, name string) {
		for i := range list {
			errs = append(errs, restrictContainer(&list[i], path.Child(name).Index(i))...)
		}
	}
	each(spec.InitContainers, "initContainers")
	each(spec.Containers, "containers")
	for i := range spec.EphemeralContainers {
		errs = append(errs, restrictContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), path.Child("ephemeralContainers").Index(i))...)
	}
	return errs
}

func everyContainerHasUser(spec *corev1.PodSpec) bool {
	has := func(c *corev1.Container) bool { return c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil }
	for i := range spec.InitContainers {
		if !has(&spec.InitContainers[i]) {
			return false
		}
	}
	for i := range spec.Containers {
		if !has(&spec.Containers[i]) {
			return false
		}
	}
	for i := range spec.EphemeralContainers {
		if !has((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon)) {
			return false
		}
	}
	return true
}

func restrictContainer(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(p *field.Path, msg string) { errs = append(errs, field.Forbidden(p, restrictedPrefix+msg)) }
	for i, port := range c.Ports {
		if port.HostPort != 0 {
			forbid(path.Child("ports").Index(i).Child("hostPort"), "host ports are not allowed")
		}
	}
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	sc := c.SecurityContext
	scPath := path.Child("securityContext")
	if sc.Privileged != nil && *sc.Privileged {
		forbid(scPath.Child("privileged"), "privileged containers are not allowed")
	}
	switch {
	case sc.AllowPrivilegeEscalation == nil:
		f := false
		sc.AllowPrivilegeEscalation = &f
	case *sc.AllowPrivilegeEscalation:
		forbid(scPath.Child("allowPrivilegeEscalation"), "must be false")
	}
	if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		forbid(scPath.Child("runAsNonRoot"), "must not be false")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		forbid(scPath.Child("runAsUser"), "must not be 0 (root)")
	}
	if sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		forbid(scPath.Child("seccompProfile", "type"), "Unconfined is not allowed; use RuntimeDefault or Localhost")
	}
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{}
	}
	for i, capability := range sc.Capabilities.Add {
		if capability != "NET_BIND_SERVICE" {
			forbid(scPath.Child("capabilities", "add").Index(i), "only NET_BIND_SERVICE may be added, not "+string(capability))
		}
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		sc.Capabilities.Drop = append(sc.Capabilities.Drop, "ALL")
	}
	return errs
}

func quoteList(list []string) string {
	out := ""
	for i, s := range list {
		if i > 0 {
			out += ", "
		}
		out += `"` + s + `"`
	}
	return out
}
