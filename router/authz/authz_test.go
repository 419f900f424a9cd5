package authz_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/router"
	"github.com/sandbox-gitops/sandbox-gitops/router/authz"
)

// TestMalformedCredentials: requests without a usable bearer token are refused before the API
// server is asked (the authorizer has no client here: asking would panic). Decisions that need
// the API server are tested against a real one in cmd/sandbox-router.
func TestMalformedCredentials(t *testing.T) {
	a := authz.New(nil, authz.Options{})
	type refusal struct {
		Status         int
		Reason, Header string
	}
	want := refusal{401, router.ReasonUnauthenticated, router.HeaderAuthorization}
	cases := map[string]struct {
		reason string
		values []string
	}{
		"none":         {reason: "no Authorization header", values: nil},
		"basic":        {reason: "another scheme", values: []string{"Basic YWxpY2U6cHc="}},
		"empty bearer": {reason: "a scheme without a token", values: []string{"Bearer "}},
		"no space":     {reason: "not scheme and token", values: []string{"Bearertoken"}},
		"twice":        {reason: "two credentials", values: []string{"Bearer a", "Bearer b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header["Authorization"] = tc.values
			err := a.Authorize(t.Context(), r, router.Request{Namespace: "default", Name: "sb", Port: 8888})
			if err == nil {
				t.Fatalf("%s: allowed", tc.reason)
			}
			if diff := cmp.Diff(want, refusal{err.Status, err.Reason, err.Header}); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
