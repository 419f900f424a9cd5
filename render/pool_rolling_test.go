package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// rollingPool is a RollingUpdate pool of replicas, with the bounds given (nil: unset).
func rollingPool(replicas int32, maxSurge, maxUnavailable *intstr.IntOrString) *extv1beta1.SandboxWarmPool {
	p := testPool(replicas, extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType)
	if maxSurge != nil || maxUnavailable != nil {
		p.Spec.UpdateStrategy.RollingUpdate = &extv1beta1.SandboxWarmPoolRollingUpdate{MaxSurge: maxSurge, MaxUnavailable: maxUnavailable}
	}
	return p
}

func num(n int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(n)) }

func pct(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }

// TestValidatePool: the update strategy is refused as the CRD refuses it, each error on its field.
func TestValidatePool(t *testing.T) {
	strategy := func(typ extv1beta1.SandboxWarmPoolUpdateStrategyType, surge, unavailable *intstr.IntOrString) *extv1beta1.SandboxWarmPoolUpdateStrategy {
		return &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: typ, RollingUpdate: &extv1beta1.SandboxWarmPoolRollingUpdate{MaxSurge: surge, MaxUnavailable: unavailable}}
	}
	const rolling = extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType
	ru := "spec.updateStrategy.rollingUpdate"
	cases := map[string]struct {
		reason   string
		strategy *extv1beta1.SandboxWarmPoolUpdateStrategy
		want     []string // type and field of each error
	}{
		"no strategy":        {reason: "unset is OnReplenish", strategy: nil},
		"RollingUpdate bare": {reason: "the bounds are optional (25% each)", strategy: &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: rolling}},
		"numbers":            {reason: "numbers of at least 0, one of them not 0", strategy: strategy(rolling, num(0), num(3))},
		"percents":           {reason: "maxUnavailable up to 100%, maxSurge above it", strategy: strategy(rolling, pct("250%"), pct("100%"))},
		"leading zeros":      {reason: "a Deployment takes digits and %, leading zeros too", strategy: strategy(rolling, pct("007%"), pct("0100%"))},
		"surge 0, unavailable unset": {
			reason: "unset is 25%, not 0", strategy: strategy(rolling, num(0), nil)},
		"maxUnavailable 150%": {
			reason: "more than all members cannot be unavailable", strategy: strategy(rolling, nil, pct("150%")),
			want: []string{"FieldValueInvalid " + ru + ".maxUnavailable"}},
		"both 0": {
			reason: "a rollout could neither add nor remove a member", strategy: strategy(rolling, num(0), num(0)),
			want: []string{"FieldValueInvalid " + ru + ".maxUnavailable"}},
		"both 0, one a percent": {
			reason: "0% is 0", strategy: strategy(rolling, pct("0%"), num(0)),
			want: []string{"FieldValueInvalid " + ru + ".maxUnavailable"}},
		"negative": {
			reason: "a bound is at least 0", strategy: strategy(rolling, num(-1), num(-2)),
			want: []string{"FieldValueInvalid " + ru + ".maxUnavailable", "FieldValueInvalid " + ru + ".maxSurge"}},
		"not a percent": {
			reason: "a string is digits and %", strategy: strategy(rolling, pct("25"), pct("1.5%")),
			want: []string{"FieldValueInvalid " + ru + ".maxUnavailable", "FieldValueInvalid " + ru + ".maxSurge"}},
		"too many digits": {
			reason: "a percent fits an int32 (9 digits) and 12 characters", strategy: strategy(rolling, pct("1000000000%"), nil),
			want: []string{"FieldValueInvalid " + ru + ".maxSurge"}},
		"too long": {
			reason: "the CRD's maxLength", strategy: strategy(rolling, pct("000000000001%"), nil),
			want: []string{"FieldValueTooLong " + ru + ".maxSurge"}},
		"rollingUpdate under Recreate": {
			reason: "bounds only with type RollingUpdate, as a Deployment's", strategy: strategy(extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType, num(1), nil),
			want: []string{"FieldValueForbidden " + ru}},
		"rollingUpdate with no type": {
			reason: "no type is OnReplenish (the CRD's default)", strategy: strategy("", num(1), nil),
			want: []string{"FieldValueForbidden " + ru}},
		"unknown type": {
			reason: "the enum", strategy: &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: "Rolling"},
			want: []string{"FieldValueNotSupported spec.updateStrategy.type"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := testPool(3, "")
			p.Spec.UpdateStrategy = tc.strategy
			var got []string
			for _, e := range ValidatePool(p) {
				got = append(got, string(e.Type)+" "+e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
	// The messages say what to write instead: the value and the rule.
	p := rollingPool(3, num(0), pct("150%"))
	if got := ValidatePool(p).ToAggregate().Error(); got != `spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must be a number of at least 0 or a percentage of spec.replicas from 0% to 100% (such as 25%)` {
		t.Errorf("message: %s", got)
	}
}

// TestPoolRollingBounds: the bounds resolved as a Deployment's controller resolves them.
func TestPoolRollingBounds(t *testing.T) {
	cases := map[string]struct {
		reason                   string
		replicas                 int32
		maxSurge, maxUnavailable *intstr.IntOrString
		want                     rollingBounds
	}{
		"pool of 1, defaults":   {reason: "25% surge rounds up to 1, 25% unavailable down to 0: it surges first", replicas: 1, want: rollingBounds{MaxSurge: 1}},
		"pool of 3, defaults":   {reason: "still surge first", replicas: 3, want: rollingBounds{MaxSurge: 1}},
		"pool of 4, defaults":   {reason: "a quarter each", replicas: 4, want: rollingBounds{MaxSurge: 1, MaxUnavailable: 1}},
		"pool of 10, defaults":  {reason: "2.5 rounds up for the surge and down for the unavailable", replicas: 10, want: rollingBounds{MaxSurge: 3, MaxUnavailable: 2}},
		"percents":              {reason: "30% of 10 and 20% of 10", replicas: 10, maxSurge: pct("30%"), maxUnavailable: pct("20%"), want: rollingBounds{MaxSurge: 3, MaxUnavailable: 2}},
		"numbers":               {reason: "numbers as they are, above the pool's size too", replicas: 2, maxSurge: num(5), maxUnavailable: num(0), want: rollingBounds{MaxSurge: 5}},
		"both round to 0":       {reason: "then 1 may be unavailable, as a Deployment resolves it", replicas: 5, maxSurge: pct("0%"), maxUnavailable: pct("10%"), want: rollingBounds{MaxUnavailable: 1}},
		"pool of 0":             {reason: "both 0, so 1 unavailable", replicas: 0, want: rollingBounds{MaxUnavailable: 1}},
		"all unavailable":       {reason: "100%", replicas: 5, maxSurge: num(0), maxUnavailable: pct("100%"), want: rollingBounds{MaxUnavailable: 5}},
		"a surge past an int32": {reason: "the largest percent of a large pool does not overflow", replicas: 10000, maxSurge: pct("999999999%"), want: rollingBounds{MaxSurge: 99999999900, MaxUnavailable: 2500}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := poolRollingBounds(rollingPool(tc.replicas, tc.maxSurge, tc.maxUnavailable), int(tc.replicas))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
	if _, err := poolRollingBounds(rollingPool(3, num(0), num(0)), 3); err == nil {
		t.Error("both 0: no error")
	}
}
