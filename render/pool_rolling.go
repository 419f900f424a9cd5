package render

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// rollingBounds are a RollingUpdate's maxSurge and maxUnavailable resolved against the members a
// pool keeps, as a Deployment's controller resolves them (deploymentutil.ResolveFenceposts):
// maxSurge rounds up and maxUnavailable down, and when both come to 0 (a small pool)
// maxUnavailable is 1, on the theory that a surge may not fit a quota. They are ints, not
// int32s: 999999999% of 2^31-1 members does not fit an int32.
type rollingBounds struct {
	// MaxSurge is how many members above the desired size may exist, members on their way out
	// counted.
	MaxSurge int
	// MaxUnavailable is how many of the desired size may be not Ready: Ready members are deleted
	// only while at least desired-MaxUnavailable stay.
	MaxUnavailable int
}

// The forms the CRD takes (see SandboxWarmPoolRollingUpdate's markers): a number of at least 0,
// or digits and '%', maxUnavailable at most 100%, maxSurge at most 9 digits, 12 characters in all.
var (
	maxUnavailablePercent = regexp.MustCompile(`^0*(100|[1-9]?[0-9])%$`)
	maxSurgePercent       = regexp.MustCompile(`^0*[0-9]{1,9}%$`)
	zeroPercent           = regexp.MustCompile(`^0+%$`)
)

// maxBoundLength is the CRD's maxLength of a bound written as a percent.
const maxBoundLength = 12

// ValidatePool checks a pool's update strategy as the CRD does, rules in CEL included (a render
// does not run CEL, and a Go caller's object never met the schema): the type is one of the enum,
// rollingUpdate only with type RollingUpdate, each bound a number of at least 0 or a percent
// (maxUnavailable at most 100%), and not both 0. The rules are a Deployment's, which the API
// server applies to spec.strategy.rollingUpdate.
func ValidatePool(pool *extv1beta1.SandboxWarmPool) field.ErrorList {
	s := pool.Spec.UpdateStrategy
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "updateStrategy")
	switch s.Type {
	case "", extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType, extv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType, extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType:
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), s.Type, []extv1beta1.SandboxWarmPoolUpdateStrategyType{
			extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType, extv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType, extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType}))
	}
	ru := s.RollingUpdate
	if ru == nil {
		return errs
	}
	rp := path.Child("rollingUpdate")
	if s.Type != extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType {
		errs = append(errs, field.Forbidden(rp, fmt.Sprintf("may be set only when type is RollingUpdate (type is %s)", updateStrategy(pool))))
	}
	errs = append(errs, validateBound(ru.MaxUnavailable, rp.Child("maxUnavailable"), maxUnavailablePercent, "a percentage of spec.replicas from 0% to 100%")...)
	errs = append(errs, validateBound(ru.MaxSurge, rp.Child("maxSurge"), maxSurgePercent, "a percentage of spec.replicas of at most 9 digits")...)
	if isZero(ru.MaxUnavailable) && isZero(ru.MaxSurge) {
		errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), boundValue(ru.MaxUnavailable), "may not be 0 when maxSurge is 0: the rollout could neither add a member nor remove one"))
	}
	return errs
}

func validateBound(v *intstr.IntOrString, p *field.Path, percent *regexp.Regexp, what string) field.ErrorList {
	switch {
	case v == nil:
		return nil
	case v.Type == intstr.Int:
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(p, v.IntVal, "must be at least 0")}
		}
	case len(v.StrVal) > maxBoundLength:
		return field.ErrorList{field.TooLong(p, v.StrVal, maxBoundLength)}
	case !percent.MatchString(v.StrVal):
		return field.ErrorList{field.Invalid(p, v.StrVal, "must be a number of at least 0 or "+what+" (such as 25%)")}
	}
	return nil
}

// isZero reports whether a bound is set and is 0 or 0%: unset is the default, 25%.
func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return false
	}
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return zeroPercent.MatchString(v.StrVal)
}

func boundValue(v *intstr.IntOrString) any {
	if v.Type == intstr.Int {
		return v.IntVal
	}
	return v.StrVal
}

// poolRollingBounds resolves a RollingUpdate pool's bounds against desired, the members it
// keeps (spec.replicas, at most the limit): unset bounds are 25% (a Deployment's defaults).
// The error is ValidatePool's, for a pool the API server's CRD would have refused.
func poolRollingBounds(pool *extv1beta1.SandboxWarmPool, desired int) (rollingBounds, error) {
	if errs := ValidatePool(pool); len(errs) > 0 {
		return rollingBounds{}, errs.ToAggregate()
	}
	surge := intstr.FromString(extv1beta1.DefaultRollingUpdateMaxSurge)
	unavailable := intstr.FromString(extv1beta1.DefaultRollingUpdateMaxUnavailable)
	if s := pool.Spec.UpdateStrategy; s != nil && s.RollingUpdate != nil {
		if s.RollingUpdate.MaxSurge != nil {
			surge = *s.RollingUpdate.MaxSurge
		}
		if s.RollingUpdate.MaxUnavailable != nil {
			unavailable = *s.RollingUpdate.MaxUnavailable
		}
	}
	b := rollingBounds{MaxSurge: scaledBound(surge, desired, true), MaxUnavailable: scaledBound(unavailable, desired, false)}
	if b.MaxSurge == 0 && b.MaxUnavailable == 0 {
		b.MaxUnavailable = 1
	}
	return b, nil
}

// scaledBound is intstr.GetScaledValueFromIntOrPercent for a validated bound, in ints: a number
// as it is, a percent of desired rounded up or down.
func scaledBound(v intstr.IntOrString, desired int, roundUp bool) int {
	if v.Type == intstr.Int {
		return int(v.IntVal)
	}
	p, _ := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")) // validated: at most 9 digits
	scaled := float64(p) * float64(desired) / 100
	if roundUp {
		return int(math.Ceil(scaled))
	}
	return int(math.Floor(scaled))
}
