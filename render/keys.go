package render

import (
	"sort"
	"strings"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// isSystemKey reports whether a label or annotation key is reserved for agent-sandbox. Such keys
// are never copied from a pod template to a Pod: otherwise a tenant could set the
// sandbox-name-hash label a Service selects on and capture another Sandbox's traffic.
func isSystemKey(key string) bool {
	return strings.HasPrefix(key, "agents.x-k8s.io/") || strings.HasPrefix(key, "extensions.agents.x-k8s.io/")
}

// isSystemAnnotation adds the trace context upstream propagates on its own.
func isSystemAnnotation(key string) bool {
	return isSystemKey(key) || key == agentsv1beta1.TraceContextAnnotation
}

// normalizeCreatedBy maps the created-by label to the values upstream lets through to Pods:
// go-client, python-client and controller are kept; anything else becomes "unknown", so a
// free-form value cannot blow up metric cardinality.
func normalizeCreatedBy(v string) string {
	switch v {
	case "go-client", "python-client", "controller":
		return v
	default:
		return "unknown"
	}
}

// sortedKeys returns the keys of m in order, joined by commas: the format of upstream's
// propagated-labels and propagated-annotations bookkeeping annotations.
func sortedKeys(keys []string) string {
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// splitKeys parses a bookkeeping annotation; an absent or empty one is an empty list.
func splitKeys(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
