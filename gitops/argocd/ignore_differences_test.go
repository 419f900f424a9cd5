package argocd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

const ignoreDifferencesFile = "ignore-differences.yaml"

// ignoreDifferences is the value of a resource.customizations.ignoreDifferences.<group>_<kind>
// key, as Argo CD's OverrideIgnoreDiff reads it.
type ignoreDifferences struct {
	JSONPointers          []string `json:"jsonPointers,omitempty"`
	JQPathExpressions     []string `json:"jqPathExpressions,omitempty"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers,omitempty"`
}

// TestIgnoreDifferences checks that the argocd-cm patch parses the way Argo CD reads it and that
// every JSON pointer names a field that exists on a live object of its kind (testdata/live), so
// an escaping mistake (a "/" in a key written without ~1) cannot ship. The jq expressions are
// not evaluated here (that needs gojq); they are only checked for shape.
func TestIgnoreDifferences(t *testing.T) {
	data, err := os.ReadFile(ignoreDifferencesFile)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatalf("%s: %v", ignoreDifferencesFile, err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Name != "argocd-cm" || cm.Namespace != "argocd" {
		t.Errorf("%s is %s %s %s/%s, want the v1 ConfigMap argocd/argocd-cm", ignoreDifferencesFile, cm.APIVersion, cm.Kind, cm.Namespace, cm.Name)
	}
	if len(cm.Data) == 0 {
		t.Fatalf("%s has no data", ignoreDifferencesFile)
	}

	const prefix = "resource.customizations.ignoreDifferences."
	for key, value := range cm.Data {
		t.Run(key, func(t *testing.T) {
			groupKind, ok := strings.CutPrefix(key, prefix)
			if !ok {
				t.Fatalf("key %q does not start with %q", key, prefix)
			}
			i := strings.LastIndex(groupKind, "_")
			if i < 0 {
				t.Fatalf("key %q has no <group>_<kind>", key)
			}
			want := schema.GroupKind{Group: groupKind[:i], Kind: groupKind[i+1:]}

			var rules ignoreDifferences
			if err := yaml.UnmarshalStrict([]byte(value), &rules); err != nil {
				t.Fatalf("value: %v", err)
			}

			live := testenv.ReadObject(t, filepath.Join("testdata", "live", strings.ToLower(want.Kind)+".yaml"))
			if gk := live.GroupVersionKind().GroupKind(); gk != want {
				t.Fatalf("testdata/live object is a %s, want %s", gk, want)
			}
			for _, p := range rules.JSONPointers {
				if err := resolvePointer(live.Object, p); err != "" {
					t.Errorf("jsonPointer %q on the live %s: %s", p, want.Kind, err)
				}
			}
			for _, e := range rules.JQPathExpressions {
				if !strings.HasPrefix(e, ".") {
					t.Errorf("jqPathExpression %q does not start at the object root", e)
				}
			}
		})
	}
}

// resolvePointer walks an RFC 6901 JSON pointer through obj and says where it stops, or "" when
// the pointer names an existing value.
func resolvePointer(obj any, pointer string) string {
	if !strings.HasPrefix(pointer, "/") {
		return "does not start with /"
	}
	cur := obj
	for _, token := range strings.Split(pointer[1:], "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[token]
			if !ok {
				return "no key " + strconv.Quote(token)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(v) {
				return "no index " + strconv.Quote(token)
			}
			cur = v[i]
		default:
			return "cannot descend into a scalar at " + strconv.Quote(token)
		}
	}
	return ""
}
