package render

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// NameHash is upstream's label-safe digest of an object name: 32-bit FNV-1a over the bytes,
// as exactly 8 lowercase hex digits. Label values such as sandbox-name-hash, warm-pool-sandbox and
// sandbox-template-ref-hash are NameHash of a name, so selectors never depend on name length.
func NameHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	const hex = "0123456789abcdef"
	v := h.Sum32()
	var buf [8]byte
	for i := 7; i >= 0; i-- {
		buf[i] = hex[v&0xf]
		v >>= 4
	}
	return string(buf[:])
}

// BlueprintHash is upstream's sandbox-template-hash: NameHash of Go's encoding/json of the
// blueprint. The JSON depends on the field order and omitempty tags of the API types and on the
// CRD defaults the API server applied, so callers must pass a blueprint that has been defaulted
// (package manifest does this) or the hash will not match what upstream computes in a cluster.
func BlueprintHash(bp *agentsv1beta1.SandboxBlueprint) (string, error) {
	return jsonNameHash(bp)
}

// PodTemplateHash is upstream's deprecated sandbox-pod-template-hash: NameHash of the JSON of the
// pod template alone. Kept because consumers of upstream still read it.
func PodTemplateHash(pt *agentsv1beta1.PodTemplate) (string, error) {
	return jsonNameHash(pt)
}

func jsonNameHash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding %T for hashing: %w", v, err)
	}
	return NameHash(string(b)), nil
}
