package krm

import (
	"bufio"
	"errors"
	"unicode/utf8"

	goyaml "go.yaml.in/yaml/v2"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
)

// writeResults writes the results as the list under results:, a batch at a time on every core,
// each result as resultYAML. One sigs.k8s.io/yaml.Marshal of the whole list queued every event of
// the document and, with its round trip through JSON, cost more than the render: 40,000 findings
// (issue 37) took the function to twice the render's time and 830 MB.
func writeResults(w *bufio.Writer, results framework.Results) error {
	for start := 0; start < len(results); start += writeBatch {
		batch := results[start:min(start+writeBatch, len(results))]
		encoded := make([][]byte, len(batch))
		errs := make([]error, len(batch))
		parallel.Each(len(batch), func(i int) {
			encoded[i], errs[i] = resultYAML(batch[i])
		})
		if err := errors.Join(errs...); err != nil {
			return err
		}
		for _, b := range encoded {
			w.Write(b)
		}
	}
	return nil
}

// resultYAML is a result as an item of the results list, byte for byte what
// sigs.k8s.io/yaml.Marshal writes for that item: a list of one encodes as the whole list's text
// for it (go-yaml v2 folds a long message at the same columns either way). Where resultValue
// knows the value sigs.k8s.io/yaml's JSON round trip would give, go-yaml v2 encodes it directly;
// otherwise the round trip runs.
func resultYAML(r *framework.Result) ([]byte, error) {
	if v, ok := resultValue(r); ok {
		return goyaml.Marshal([]any{v})
	}
	return yaml.Marshal(framework.Results{r})
}

// resultValue is the value sigs.k8s.io/yaml hands go-yaml v2 for a result after its JSON round
// trip: the fields the json tags keep (omitempty: empty strings, a zero index, no tags are left
// out; a pointer that is set stays, even when all its fields are empty), with go-yaml sorting the
// keys. It declines (false) a value the round trip could change: a current or proposed value
// other than a string (numbers come back typed by go-yaml, structs as maps), or a string that is
// not UTF-8 (JSON replaces its bytes, go-yaml v2 would write it as !!binary).
func resultValue(r *framework.Result) (map[string]any, bool) {
	m := map[string]any{}
	ok := true
	str := func(into map[string]any, key, s string) {
		if s != "" {
			into[key] = s
			ok = ok && utf8.ValidString(s)
		}
	}
	str(m, "message", r.Message)
	str(m, "severity", string(r.Severity))
	if ref := r.ResourceRef; ref != nil {
		rm := map[string]any{}
		str(rm, "apiVersion", ref.APIVersion)
		str(rm, "kind", ref.Kind)
		str(rm, "name", ref.Name)
		str(rm, "namespace", ref.Namespace)
		m["resourceRef"] = rm
	}
	if f := r.Field; f != nil {
		fm := map[string]any{}
		str(fm, "path", f.Path)
		for key, v := range map[string]any{"currentValue": f.CurrentValue, "proposedValue": f.ProposedValue} {
			switch s := v.(type) {
			case nil:
			case string:
				fm[key] = s // kept when empty: omitempty leaves out a nil interface only
				ok = ok && utf8.ValidString(s)
			default:
				ok = false
			}
		}
		m["field"] = fm
	}
	if f := r.File; f != nil {
		fm := map[string]any{}
		str(fm, "path", f.Path)
		if f.Index != 0 {
			fm["index"] = f.Index
		}
		m["file"] = fm
	}
	if len(r.Tags) > 0 {
		tm := map[string]any{}
		for k, v := range r.Tags {
			tm[k] = v
			ok = ok && utf8.ValidString(k) && utf8.ValidString(v)
		}
		m["tags"] = tm
	}
	return m, ok
}
