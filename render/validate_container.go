package render

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of one container's fields, as k8s.io/kubernetes pkg/apis/core/validation
// (v1.37, default feature gates) checks them in validateContainerCommon and validateContainers.

// envFieldPaths are the fields of its Pod an environment variable may read (the
// downward API: validEnvDownwardAPIFieldPathExpressions); metadata.labels['key'] and
// metadata.annotations['key'] name one label or annotation.
var envFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

// envResources are the resources of its container an environment variable may read
// (validContainerResourceFieldPathExpressions), besides requests.hugepages-<size> and
// limits.hugepages-<size>.
var envResources = []string{
	"limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", "requests.ephemeral-storage", "requests.memory",
}

// validateEnv follows ValidateEnv with RelaxedEnvironmentVariableValidation, which is locked on
// since v1.34: a name is any printable ASCII but '=', and not empty. A valueFrom has exactly one
// source and no value beside it (validateEnvVarValueFrom): the fields of the Pod and the
// resources of the container it may read, a ConfigMap or Secret name and key the API server
// accepts, or a fileKeyRef to an emptyDir volume of the Pod (validateFileKeyRefVolumes).
func validateEnv(env []corev1.EnvVar, volumes map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range env {
		e, p := &env[i], path.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "every environment variable needs a name"))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
			}
		}
		if e.ValueFrom == nil {
			continue
		}
		from, vf := p.Child("valueFrom"), e.ValueFrom
		sources := 0
		if r := vf.FieldRef; r != nil {
			sources++
			errs = append(errs, validateEnvFieldRef(r, from.Child("fieldRef"))...)
		}
		if r := vf.ResourceFieldRef; r != nil {
			sources++
			rp := from.Child("resourceFieldRef", "resource")
			switch {
			case r.Resource == "":
				errs = append(errs, field.Required(rp, "the resource of the container to read, such as limits.memory"))
			case !slices.Contains(envResources, r.Resource) && !strings.HasPrefix(r.Resource, "requests.hugepages-") && !strings.HasPrefix(r.Resource, "limits.hugepages-"):
				errs = append(errs, field.NotSupported(rp, r.Resource, envResources))
			}
		}
		if r := vf.ConfigMapKeyRef; r != nil {
			sources++
			errs = append(errs, validateEnvKeyRef(from.Child("configMapKeyRef"), "ConfigMap", r.Name, r.Key)...)
		}
		if r := vf.SecretKeyRef; r != nil {
			sources++
			errs = append(errs, validateEnvKeyRef(from.Child("secretKeyRef"), "Secret", r.Name, r.Key)...)
		}
		if r := vf.FileKeyRef; r != nil {
			sources++
			vp := from.Child("fileKeyRef", "volumeName")
			if emptyDir, ok := volumes[r.VolumeName]; !ok {
				errs = append(errs, notFound(vp, r.VolumeName, "no volume of the Pod has this name"))
			} else if !emptyDir {
				errs = append(errs, field.Invalid(vp, r.VolumeName, "referenced volume must be of type emptyDir"))
			}
		}
		switch {
		case sources == 0:
			errs = append(errs, field.Required(from, "one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef or fileKeyRef"))
		case e.Value != "":
			errs = append(errs, field.Forbidden(from, "may not be specified when `value` is not empty"))
		case sources > 1:
			errs = append(errs, field.Forbidden(from, "may not have more than one field specified at a time"))
		}
	}
	return errs
}

// validateEnvFieldRef follows validateObjectFieldSelector and ConvertDownwardAPIFieldLabel: the
// apiVersion is v1 (the default), the field one of envFieldPaths or a label or annotation by a
// valid key.
func validateEnvFieldRef(r *corev1.ObjectFieldSelector, path *field.Path) field.ErrorList {
	if r.APIVersion != "" && r.APIVersion != "v1" {
		return field.ErrorList{field.NotSupported(path.Child("apiVersion"), r.APIVersion, []string{"v1"})}
	}
	fp := path.Child("fieldPath")
	if r.FieldPath == "" {
		return field.ErrorList{field.Required(fp, "the field of the Pod to read, such as metadata.name")}
	}
	if strings.HasSuffix(r.FieldPath, "']") {
		if name, key, ok := strings.Cut(strings.TrimSuffix(r.FieldPath, "']"), "['"); ok && name != "" {
			var errs field.ErrorList
			switch name {
			case "metadata.annotations":
				key = strings.ToLower(key)
				fallthrough
			case "metadata.labels":
				for _, msg := range validation.IsQualifiedName(key) {
					errs = append(errs, field.Invalid(fp, r.FieldPath, msg))
				}
			default:
				errs = append(errs, field.Invalid(fp, r.FieldPath, "only metadata.labels and metadata.annotations take a key in ['...']"))
			}
			return errs
		}
	}
	if r.FieldPath == "spec.host" { // the old name of spec.nodeName, converted
		return nil
	}
	if !slices.Contains(envFieldPaths, r.FieldPath) {
		return field.ErrorList{field.NotSupported(fp, r.FieldPath, envFieldPaths)}
	}
	return nil
}

// validateEnvKeyRef follows validateConfigMapKeySelector and validateSecretKeySelector: the name
// is a DNS subdomain, the key a ConfigMap key.
func validateEnvKeyRef(p *field.Path, kind, name, key string) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "the "+kind+" in the Pod's namespace to read the variable from"))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), name, kind+" name: "+msg))
		}
	}
	if key == "" {
		errs = append(errs, field.Required(p.Child("key"), "the key of the "+kind+" to read the variable from"))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(p.Child("key"), key, msg))
		}
	}
	return errs
}

// validateEnvFrom follows ValidateEnvFrom: a prefix is an environment variable name (relaxed, as
// in validateEnv), and each source exactly one of configMapRef and secretRef whose name is a DNS
// subdomain (or a prefix of one: a trailing '-' is allowed).
func validateEnvFrom(envFrom []corev1.EnvFromSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range envFrom {
		ef, p := &envFrom[i], path.Index(i)
		if ef.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(ef.Prefix) {
				errs = append(errs, field.Invalid(p.Child("prefix"), ef.Prefix, msg))
			}
		}
		sources := 0
		if r := ef.ConfigMapRef; r != nil {
			sources++
			errs = append(errs, validateEnvFromName(p.Child("configMapRef", "name"), "ConfigMap", r.Name)...)
		}
		if r := ef.SecretRef; r != nil {
			sources++
			errs = append(errs, validateEnvFromName(p.Child("secretRef", "name"), "Secret", r.Name)...)
		}
		switch {
		case sources == 0:
			errs = append(errs, field.Required(p, "one of configMapRef or secretRef"))
		case sources > 1:
			errs = append(errs, field.Forbidden(p, "may not have more than one field specified at a time"))
		}
	}
	return errs
}

// validateEnvFromName: envFrom reads a ConfigMap or Secret by a name that may also be a prefix
// (ValidateConfigMapName and ValidateSecretName with prefix true: a trailing '-' is allowed).
func validateEnvFromName(p *field.Path, kind, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "the "+kind+" in the Pod's namespace to read the variables from")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, true) {
		errs = append(errs, field.Invalid(p, name, kind+" name: "+msg))
	}
	return errs
}

// validateVolumeMounts follows ValidateVolumeMounts: a mount names a volume of the Pod (its own,
// or one the render adds for a volume claim template), has a path unique in its container, a
// subPath or subPathExpr (not both) that is relative and without "..", a mountPropagation None,
// HostToContainer or Bidirectional (only in a privileged container), and a recursiveReadOnly
// Disabled, or Enabled or IfPossible only on a read-only mount without propagation.
func validateVolumeMounts(c *corev1.Container, volumes map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := make(map[string]bool, len(c.VolumeMounts))
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	for i := range c.VolumeMounts {
		m, p := &c.VolumeMounts[i], path.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the name of the volume to mount"))
		} else if _, ok := volumes[m.Name]; !ok {
			errs = append(errs, notFound(p.Child("name"), m.Name, "no volume of the Pod has this name: add it to spec.podTemplate.spec.volumes or spec.volumeClaimTemplates"))
		}
		if m.MountPath == "" {
			// The schema's list map, keyed by mountPath, takes an empty one.
			errs = append(errs, field.Required(p.Child("mountPath"), "a volume mount needs the path it is mounted at"))
		} else if paths[m.MountPath] {
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths[m.MountPath] = true
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
		if mp := m.MountPropagation; mp != nil {
			errs = append(errs, validateRequiredEnum(*mp, p, "mountPropagation",
				corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone)...)
			if *mp == corev1.MountPropagationBidirectional && !privileged {
				errs = append(errs, field.Forbidden(p.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
			}
		}
		if rro := m.RecursiveReadOnly; rro != nil {
			rp := p.Child("recursiveReadOnly")
			switch *rro {
			case corev1.RecursiveReadOnlyDisabled:
			case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
				if !m.ReadOnly {
					errs = append(errs, field.Forbidden(rp, "may only be specified when readOnly is true"))
				}
				if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
					errs = append(errs, field.Forbidden(rp, "may only be specified when mountPropagation is None or not specified"))
				}
			default:
				errs = append(errs, field.NotSupported(rp, *rro, []corev1.RecursiveReadOnlyMode{corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled}))
			}
		}
	}
	return errs
}

// validateLocalDescendingPath follows the function of that name: a relative path without "..".
func validateLocalDescendingPath(p string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(p, "/") {
		errs = append(errs, field.Invalid(path, p, "must be a relative path"))
	}
	if slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
		errs = append(errs, field.Invalid(path, p, "must not contain '..'"))
	}
	return errs
}

// notFound is field.NotFound with a detail that says where the name was looked for.
func notFound(p *field.Path, value any, detail string) *field.Error {
	e := field.NotFound(p, value)
	e.Detail = detail
	return e
}

// validateResources follows validateResourceRequirements for a container, on the requests the
// Pod's defaults give it (a limit without a request is also the request): every resource name is
// one a container may ask for (resourceName), every quantity at least 0 and, for an extended
// resource, whole; a request at most its limit; an extended resource or huge pages cannot be
// overcommitted, so the request needs a limit, equal to it; huge pages come in whole pages and
// need cpu or memory beside them.
func validateResources(r *corev1.ResourceRequirements, container *field.Path, name string) field.ErrorList {
	if len(r.Limits) == 0 && len(r.Requests) == 0 {
		return nil
	}
	var errs field.ErrorList
	hugePages, cpuOrMemory := false, false
	// The paths are made only for an error: a render validates every Pod it makes.
	path := func(elem ...string) *field.Path { return container.Child(name, elem...) }
	check := func(list string, rl corev1.ResourceList) {
		for name, q := range rl {
			at := func() *field.Path { return path(list).Key(string(name)) }
			msgs := resourceName(name)
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(at(), name, msg))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(at(), q.String(), "must be greater than or equal to 0"))
			}
			if isExtendedResource(name) && q.MilliValue()%1000 != 0 {
				errs = append(errs, field.Invalid(at(), q.String(), "must be an integer: "+string(name)+" is counted in whole devices"))
			}
			if isHugePages(name) {
				hugePages = true
				if !wholePages(name, q) {
					errs = append(errs, field.Invalid(at(), q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name)))
				}
			}
			cpuOrMemory = cpuOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
			if list != "requests" || len(msgs) > 0 {
				continue // a name to fix first: whether it may be overcommitted says little
			}
			overcommit := isNativeResource(name) && !isHugePages(name)
			switch limit, ok := r.Limits[name]; {
			case !ok && !overcommit:
				errs = append(errs, field.Required(path("limits").Key(string(name)),
					fmt.Sprintf("%s cannot be overcommitted: its request needs a limit, equal to it (a limit alone is also the request)", name)))
			case !ok:
			case q.Cmp(limit) != 0 && !overcommit:
				errs = append(errs, field.Invalid(at(), q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			case q.Cmp(limit) > 0:
				errs = append(errs, field.Invalid(at(), q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		}
	}
	check("limits", r.Limits)
	check("requests", r.Requests)
	if hugePages && !cpuOrMemory {
		errs = append(errs, field.Forbidden(path(), "HugePages require cpu or memory"))
	}
	return errs
}

// containerResources are the resources without a domain a container may ask for
// (IsStandardContainerResourceName), besides hugepages-<size>.
var containerResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// resourceName is what is wrong with a container's resource name, following
// ValidateContainerResourceName: a qualified name; without a domain cpu,
// memory, ephemeral-storage or hugepages-<size>; with one, in kubernetes.io or an extended
// resource (example.com/gpu). The API server says "must be a standard resource type or fully
// qualified" and "must be a standard resource for containers" of bogus.resource: one finding here
// says both.
func resourceName(name corev1.ResourceName) []string {
	msgs := validation.IsQualifiedName(string(name))
	switch {
	case !strings.Contains(string(name), "/"):
		if !slices.Contains(containerResources, name) && !isHugePages(name) {
			msgs = append(msgs, "must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or an extended resource with a domain, such as example.com/gpu")
		}
	case len(msgs) == 0 && !isNativeResource(name) && !isExtendedResource(name):
		msgs = append(msgs, "doesn't follow extended resource name standard")
	}
	return msgs
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// isNativeResource: a name without a domain, or in kubernetes.io (IsNativeResource).
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResource follows IsExtendedResourceName: a name with a domain other than
// kubernetes.io that, as a quota's requests.<name>, is a qualified name.
func isExtendedResource(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// wholePages follows IsHugePageResourceValueDivisible: q is a whole number of the pages the name
// gives the size of.
func wholePages(name corev1.ResourceName, q resource.Quantity) bool {
	size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err != nil || size.Sign() <= 0 || size.MilliValue()%1000 != 0 {
		return false
	}
	return q.Value()%size.Value() == 0
}

// probeKind is which of a container's probes a probe is.
type probeKind int

const (
	livenessProbe probeKind = iota
	readinessProbe
	startupProbe
)

// validateProbe follows validateProbe, validateLivenessProbe, validateReadinessProbe and
// validateStartupProbe, on the values after the Pod's defaults (0 seconds and thresholds are
// defaults): exactly one handler (validateHandler); no negative delay, timeout, period or
// threshold; a successThreshold of 1 for liveness and startup probes; a
// terminationGracePeriodSeconds above 0, and none on a readiness probe.
func validateProbe(pr *corev1.Probe, kind probeKind, path *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	h := handler{exec: pr.Exec, httpGet: pr.HTTPGet, tcpSocket: pr.TCPSocket, grpc: pr.GRPC}
	errs := validateHandler(h, 0, path)
	for _, f := range []struct {
		field string
		value int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold},
	} {
		if f.value < 0 {
			errs = append(errs, field.Invalid(path.Child(f.field), f.value, apivalidation.IsNegativeErrorMsg))
		}
	}
	if kind != readinessProbe && pr.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		if kind == readinessProbe {
			errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		} else if *g <= 0 {
			errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

// handler is what a probe or a lifecycle hook does (commonHandler).
type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
	// hook: a lifecycle hook, which may sleep but not call grpc.
	hook bool
	// none: no hook at all (a nil postStart or preStop), nothing to check.
	none bool
}

func lifecycleHandler(h *corev1.LifecycleHandler) handler {
	if h == nil {
		return handler{none: true}
	}
	return handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep, hook: true}
}

// validateHandler follows validateHandler and its actions: exactly one of exec (with a
// command), httpGet (a port number or name, a scheme HTTP or HTTPS, header names), tcpSocket (a
// port), grpc (a port number) and, in a lifecycle hook, sleep (0 to the Pod's grace period).
func validateHandler(h handler, grace int64, path *field.Path) field.ErrorList {
	if h.none {
		return nil
	}
	var errs field.ErrorList
	n := 0
	one := func(name string, set bool, check func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n++; n > 1 {
			errs = append(errs, field.Forbidden(path.Child(name), "may not specify more than 1 handler type"))
			return
		}
		errs = append(errs, check(path.Child(name))...)
	}
	one("exec", h.exec != nil, func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "the command to run")}
		}
		return nil
	})
	one("httpGet", h.httpGet != nil, func(p *field.Path) field.ErrorList {
		errs := validatePortNumOrName(h.httpGet.Port, p.Child("port"))
		errs = append(errs, validateEnum(h.httpGet.Scheme, p, "scheme", corev1.URISchemeHTTP, corev1.URISchemeHTTPS)...)
		for i, hdr := range h.httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
				errs = append(errs, field.Invalid(p.Child("httpHeaders").Index(i).Child("name"), hdr.Name, msg))
			}
		}
		return errs
	})
	one("tcpSocket", h.tcpSocket != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(h.tcpSocket.Port, p.Child("port"))
	})
	one("grpc", h.grpc != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(intstr.FromInt32(h.grpc.Port), p.Child("port"))
	})
	one("sleep", h.sleep != nil, func(p *field.Path) field.ErrorList {
		if s := h.sleep.Seconds; s < 0 || s > grace {
			return field.ErrorList{field.Invalid(p.Child("seconds"), s, fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", grace))}
		}
		return nil
	})
	if n == 0 {
		kinds := "exec, httpGet, tcpSocket or grpc"
		if h.hook {
			kinds = "exec, httpGet, tcpSocket or sleep"
		}
		errs = append(errs, field.Required(path, "must specify a handler type: "+kinds))
	}
	return errs
}

// validatePortNumOrName follows ValidatePortNumOrName: a number 1-65535 or an IANA service name.
func validatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(p, port.IntValue(), msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		errs = append(errs, field.Invalid(p, port.StrVal, msg))
	}
	return errs
}
