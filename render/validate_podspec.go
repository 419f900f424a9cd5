package render

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePodSpec checks the Pod's own fields as k8s.io/kubernetes pkg/apis/core/validation
// ValidatePodSpec does (v1.37, default feature gates), each rule citing the function it follows.
// Empty enums are accepted: the Pod's defaults fill them before validation.
func validatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	// validateRestartPolicy, validateDNSPolicy, ValidatePreemptionPolicy, validateOS.
	errs := validateEnum(spec.RestartPolicy, path, "restartPolicy", corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	errs = append(errs, validateEnum(spec.DNSPolicy, path, "dnsPolicy",
		corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone)...)
	if pp := spec.PreemptionPolicy; pp != nil {
		if *pp == "" {
			errs = append(errs, field.Required(path.Child("preemptionPolicy"), "PreemptLowerPriority or Never; leave it out for the priority class's"))
		}
		errs = append(errs, validateEnum(*pp, path, "preemptionPolicy", corev1.PreemptLowerPriority, corev1.PreemptNever)...)
	}
	if os := spec.OS; os != nil {
		if os.Name == "" {
			errs = append(errs, field.Required(path.Child("os", "name"), "linux or windows"))
		}
		errs = append(errs, validateEnum(os.Name, path.Child("os"), "name", corev1.Linux, corev1.Windows)...)
	}
	// The paths of the fields below are made only for the fields a Pod has: a render validates
	// every Pod it makes.
	if spec.DNSConfig != nil || spec.DNSPolicy == corev1.DNSNone {
		errs = append(errs, validateDNSConfig(spec, path.Child("dnsConfig"))...)
	}
	if len(spec.NodeSelector) > 0 {
		errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	}
	if spec.SecurityContext != nil {
		errs = append(errs, validatePodSecurityContext(spec.SecurityContext, path.Child("securityContext"))...)
	}

	errs = append(errs, validatePodSpecNames(spec, path)...)
	return append(errs, validatePodSpecLists(spec, path)...)
}

// validatePodSpecNames follows ValidatePodSpec on the names a Pod holds: of the objects it refers
// to, its hostname and subdomain; and its deadline and tolerations.
func validatePodSpecNames(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Names of other objects the Pod refers to. serviceAccount is the deprecated
	// name of serviceAccountName, which the Pod's defaults copy into it when it is empty.
	for _, ref := range []struct {
		field, name string
	}{
		{"serviceAccountName", spec.ServiceAccountName},
		{"serviceAccount", spec.DeprecatedServiceAccount},
		{"nodeName", spec.NodeName},
		{"priorityClassName", spec.PriorityClassName},
	} {
		if ref.name == "" || (ref.field == "serviceAccount" && spec.ServiceAccountName != "") {
			continue
		}
		for _, msg := range apivalidation.NameIsDNSSubdomain(ref.name, false) {
			errs = append(errs, field.Invalid(path.Child(ref.field), ref.name, msg))
		}
	}
	if rc := spec.RuntimeClassName; rc != nil {
		// ValidateRuntimeClassName; an empty one is not a name either.
		for _, msg := range apivalidation.NameIsDNSSubdomain(*rc, false) {
			errs = append(errs, field.Invalid(path.Child("runtimeClassName"), *rc, msg))
		}
	}
	if ads := spec.ActiveDeadlineSeconds; ads != nil && (*ads < 1 || *ads > math.MaxInt32) {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *ads, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	// The hostname and the subdomain become DNS labels of the Pod's name in the cluster's DNS.
	for _, f := range []struct{ field, value string }{{"hostname", spec.Hostname}, {"subdomain", spec.Subdomain}} {
		if f.value == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Label(f.value) {
			errs = append(errs, field.Invalid(path.Child(f.field), f.value, msg))
		}
	}
	if spec.HostnameOverride != nil {
		errs = append(errs, validateHostnameOverride(spec, path.Child("hostnameOverride"))...)
	}
	if len(spec.Tolerations) > 0 {
		errs = append(errs, validateTolerations(spec.Tolerations, path.Child("tolerations"))...)
	}
	return errs
}

// validatePodSpecLists follows ValidatePodSpec on host aliases, readiness and scheduling gates,
// and the host namespaces a Pod shares.
func validatePodSpecLists(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ha := range spec.HostAliases {
		// ValidateHostAliases.
		p := path.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIPForLegacyField(p.Child("ip"), ha.IP, true, nil)...)
		for j, h := range ha.Hostnames {
			for _, msg := range validation.IsDNS1123Subdomain(h) {
				errs = append(errs, field.Invalid(p.Child("hostnames").Index(j), h, msg))
			}
		}
	}
	for i, g := range spec.ReadinessGates {
		// validateReadinessGates.
		for _, msg := range validation.IsQualifiedName(string(g.ConditionType)) {
			errs = append(errs, field.Invalid(path.Child("readinessGates").Index(i).Child("conditionType"), g.ConditionType, msg))
		}
	}
	gates := make(map[string]bool, len(spec.SchedulingGates))
	for i, g := range spec.SchedulingGates {
		// validateSchedulingGates.
		p := path.Child("schedulingGates").Index(i).Child("name")
		for _, msg := range validation.IsQualifiedName(g.Name) {
			errs = append(errs, field.Invalid(p, g.Name, msg))
		}
		if gates[g.Name] {
			errs = append(errs, field.Duplicate(p, g.Name))
		}
		gates[g.Name] = true
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		// validateShareProcessNamespace.
		errs = append(errs, field.Invalid(path.Child("shareProcessNamespace"), true, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	if spec.HostUsers != nil && !*spec.HostUsers {
		// validateHostUsers: a user namespace shares none of the host's others.
		for _, f := range []struct {
			field string
			set   bool
		}{{"hostNetwork", spec.HostNetwork}, {"hostPID", spec.HostPID}, {"hostIPC", spec.HostIPC}} {
			if f.set {
				errs = append(errs, field.Forbidden(path.Child(f.field), "may not be true when `hostUsers` is false"))
			}
		}
	}
	return errs
}

// validateDNSConfig follows validatePodDNSConfig: dnsPolicy None needs a nameserver; at most 3
// nameservers, each an IP address; at most 32 search domains of 2048 characters in all, each a
// DNS subdomain (underscores allowed); every option named.
func validateDNSConfig(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	c := spec.DNSConfig
	if spec.DNSPolicy == corev1.DNSNone {
		if c == nil {
			return field.ErrorList{field.Required(path, "dnsPolicy None needs dnsConfig with at least one nameserver")}
		}
		if len(c.Nameservers) == 0 {
			return field.ErrorList{field.Required(path.Child("nameservers"), "dnsPolicy None needs at least one nameserver")}
		}
	}
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	if len(c.Nameservers) > 3 {
		errs = append(errs, field.TooMany(path.Child("nameservers"), len(c.Nameservers), 3))
	}
	for i, ns := range c.Nameservers {
		errs = append(errs, validation.IsValidIPForLegacyField(path.Child("nameservers").Index(i), ns, true, nil)...)
	}
	if len(c.Searches) > 32 {
		errs = append(errs, field.TooMany(path.Child("searches"), len(c.Searches), 32))
	}
	if n := len(strings.Join(c.Searches, " ")); n > 2048 {
		errs = append(errs, field.Invalid(path.Child("searches"), fmt.Sprintf("%d characters", n), "must not have more than 2048 characters (including spaces) in the search list"))
	}
	for i, s := range c.Searches {
		if s == "." {
			continue
		}
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(strings.TrimSuffix(s, ".")) {
			errs = append(errs, field.Invalid(path.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(path.Child("options").Index(i).Child("name"), "every DNS option needs a name"))
		}
	}
	return errs
}

// validateHostnameOverride follows validatePodHostName: a DNS subdomain of at most 64
// characters, not with setHostnameAsFQDN nor with hostNetwork.
func validateHostnameOverride(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	h := spec.HostnameOverride
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
		errs = append(errs, field.Forbidden(p, "may not be specified when setHostnameAsFQDN is true"))
	}
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(p, "may not be specified when hostNetwork is true"))
	}
	if len(*h) > 64 {
		errs = append(errs, field.TooLong(p, *h, 64))
	}
	for _, msg := range validation.IsDNS1123Subdomain(*h) {
		errs = append(errs, field.Invalid(p, *h, msg))
	}
	return errs
}

// taintEffects are the effects a toleration may name.
var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// validateTolerations follows ValidateTolerations: a key is a label name, and only Exists
// matches every key; Equal (or no operator) takes a label value, Exists none; tolerationSeconds
// only with NoExecute; an effect NoSchedule, PreferNoSchedule or NoExecute. The operators Lt
// and Gt are refused: they are behind the alpha feature gate TaintTolerationComparisonOperators,
// off by default.
func validateTolerations(ts []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range ts {
		t, p := &ts[i], path.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		} else if t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		errs = append(errs, validateEnum(t.Effect, p, "effect", taintEffects...)...)
	}
	return errs
}

// validatePodSecurityContext follows validatePodSpecSecurityContext: user and group IDs in
// 0-2147483647, the enums of fsGroupChangePolicy and supplementalGroupsPolicy, and the seccomp
// profile.
func validatePodSecurityContext(sc *corev1.PodSecurityContext, path *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateIDs(path, sc.RunAsUser, sc.RunAsGroup)
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(path.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	for i, g := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(g) {
			errs = append(errs, field.Invalid(path.Child("supplementalGroups").Index(i), g, msg))
		}
	}
	if p := sc.FSGroupChangePolicy; p != nil {
		errs = append(errs, validateRequiredEnum(*p, path, "fsGroupChangePolicy", corev1.FSGroupChangeOnRootMismatch, corev1.FSGroupChangeAlways)...)
	}
	if p := sc.SupplementalGroupsPolicy; p != nil {
		errs = append(errs, validateRequiredEnum(*p, path, "supplementalGroupsPolicy", corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict)...)
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, path.Child("seccompProfile"))...)
	return errs
}

// validateSecurityContext follows ValidateSecurityContext for a container: user and group IDs,
// procMount Default or Unmasked (Unmasked only in a user namespace), privileged not with
// allowPrivilegeEscalation false, and the seccomp profile.
func validateSecurityContext(sc *corev1.SecurityContext, hostUsers bool, path *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateIDs(path, sc.RunAsUser, sc.RunAsGroup)
	if pm := sc.ProcMount; pm != nil {
		errs = append(errs, validateRequiredEnum(*pm, path, "procMount", corev1.DefaultProcMount, corev1.UnmaskedProcMount)...)
		if *pm == corev1.UnmaskedProcMount && hostUsers {
			errs = append(errs, field.Invalid(path.Child("procMount"), *pm, "`hostUsers` must be false to use `Unmasked`"))
		}
	}
	if ape := sc.AllowPrivilegeEscalation; ape != nil && !*ape && sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Invalid(path.Child("allowPrivilegeEscalation"), false, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, path.Child("seccompProfile"))...)
	return errs
}

// validateIDs: a runAsUser is a Unix user ID and a runAsGroup a group ID, 0-2147483647.
func validateIDs(path *field.Path, user, group *int64) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(path.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(path.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

// validateSeccompProfile follows validateSeccompProfileField: a type Localhost, RuntimeDefault or
// Unconfined; a localhostProfile, a relative path without "..", exactly with Localhost.
func validateSeccompProfile(sp *corev1.SeccompProfile, path *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	errs := validateRequiredEnum(sp.Type, path, "type",
		corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined)
	switch {
	case sp.Type == corev1.SeccompProfileTypeLocalhost && sp.LocalhostProfile == nil:
		errs = append(errs, field.Required(path.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
	case sp.Type == corev1.SeccompProfileTypeLocalhost:
		errs = append(errs, validateLocalDescendingPath(*sp.LocalhostProfile, path.Child("localhostProfile"))...)
	case sp.LocalhostProfile != nil:
		errs = append(errs, field.Invalid(path.Child("localhostProfile"), *sp.LocalhostProfile, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

// validateRequiredEnum is validateEnum for a field no default fills: empty is refused too.
func validateRequiredEnum[T ~string](v T, parent *field.Path, name string, supported ...T) field.ErrorList {
	if v == "" {
		quoted := make([]string, len(supported))
		for i, s := range supported {
			quoted[i] = strconv.Quote(string(s))
		}
		return field.ErrorList{field.Required(parent.Child(name), "supported values: "+strings.Join(quoted, ", "))}
	}
	return validateEnum(v, parent, name, supported...)
}
