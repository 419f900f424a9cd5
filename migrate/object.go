// Package migrate rewrites v1alpha1 agent-sandbox objects as v1beta1, the version our CRDs store
// and serve, by editing their YAML nodes: the edits are upstream's conversion rules, asked of
// api/convert (the one home of the rules, which the webhook and the render's edge call too), and
// everything they do not touch (comments, key order, quoting, anchors, other documents) is kept.
// It is pure: bytes or nodes in, bytes or nodes out.
//
// A conversion that would lose information the v1alpha1 object carries is refused with an error
// naming the field, never done silently; where the loss depends on objects migrate cannot see, it
// is a warning.
package migrate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/api/convert"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// The groups, versions and kinds migrate converts.
const (
	agentsGroup     = "agents.x-k8s.io"
	extensionsGroup = "extensions.agents.x-k8s.io"
	fromVersion     = "v1alpha1"
	toVersion       = "v1beta1"
)

// Options are what a conversion may know beyond the object itself.
type Options struct {
	// PoolTemplate returns the template a SandboxWarmPool uses, if the pool is known. A v1alpha1
	// claim naming both a template and a specific pool becomes a v1beta1 claim that names only the
	// pool; the conversion is lossless only if that pool uses the same template.
	PoolTemplate func(namespace, name string) (template string, known bool)
}

// Finding is a problem with one object: an error (the object is not converted) or a warning (it
// is, but the user should check something migrate cannot see).
type Finding struct {
	Err     *field.Error
	Warning bool
	// Line is the 1-based line of the offending node in the parsed text, 0 when unknown.
	Line int
}

// Result is what converting one object did.
type Result struct {
	// Changed is true when the object was v1alpha1 and is now v1beta1.
	Changed bool
	// Kind, Namespace and Name identify the object in messages.
	Kind, Namespace, Name string
	Findings              []Finding
	// edits are the minimal text changes equivalent to the node edits, where migrate could
	// express them (see File).
	edits []textEdit
	// reencode is set when a node edit has no text form and the document must be re-encoded.
	reencode bool
}

// Failed reports whether any finding is an error; the object was then left as it was.
func (r *Result) Failed() bool {
	for _, f := range r.Findings {
		if !f.Warning {
			return true
		}
	}
	return false
}

// Object converts n in place if it is a v1alpha1 agent-sandbox object; other objects are left
// alone. Nothing is changed when the result has an error finding: every check runs before the
// first edit.
func Object(n *kyaml.RNode, opts Options) *Result {
	c := &converter{opts: opts, res: &Result{}}
	doc := n.YNode()
	c.object(doc)
	if c.res.Failed() {
		return c.res
	}
	for _, e := range c.edits {
		e()
	}
	c.res.Changed = len(c.edits) > 0
	return c.res
}

// converter plans a conversion: checks first, edits (node and text) afterwards.
type converter struct {
	opts  Options
	res   *Result
	edits []func()
}

func (c *converter) fail(node *yaml, err *field.Error) {
	c.res.Findings = append(c.res.Findings, Finding{Err: err, Line: line(node)})
}

func (c *converter) warn(node *yaml, err *field.Error) {
	c.res.Findings = append(c.res.Findings, Finding{Err: err, Warning: true, Line: line(node)})
}

type yaml = kyaml.Node

func line(n *yaml) int {
	if n == nil {
		return 0
	}
	return n.Line
}

func (c *converter) object(obj *yaml) {
	if obj.Kind != kyaml.MappingNode {
		return
	}
	_, av := get(obj, "apiVersion")
	_, kv := get(obj, "kind")
	if av == nil || kv == nil || av.Kind != kyaml.ScalarNode || kv.Kind != kyaml.ScalarNode {
		return
	}
	c.res.Kind = kv.Value
	if _, md := get(obj, "metadata"); md != nil {
		if _, v := get(md, "name"); v != nil {
			c.res.Name = v.Value
		}
		if _, v := get(md, "namespace"); v != nil {
			c.res.Namespace = v.Value
		}
	}
	if av.Value == "v1" && strings.HasSuffix(kv.Value, "List") {
		c.list(obj)
		return
	}
	if !convert.IsV1alpha1(av.Value) {
		return
	}
	group := strings.TrimSuffix(av.Value, "/"+fromVersion)
	if !c.restoreWebhookKept(obj, group, kv.Value) {
		return
	}
	switch {
	case group == agentsGroup && kv.Value == "Sandbox":
		c.sandbox(obj)
	case group == extensionsGroup && kv.Value == "SandboxTemplate":
		c.template(obj)
	case group == extensionsGroup && kv.Value == "SandboxClaim":
		c.claim(obj)
	case group == extensionsGroup && kv.Value == "SandboxWarmPool":
		// Same fields in both versions; v1beta1 only makes replicas optional.
	default:
		c.fail(kv, field.NotSupported(field.NewPath("kind"), kv.Value, []string{"Sandbox", "SandboxTemplate", "SandboxClaim", "SandboxWarmPool"}))
		return
	}
	c.setScalar(av, group+"/"+toVersion)
}

// restoreWebhookKept handles the annotation in which the conversion webhook keeps, on an object
// read through v1alpha1, the v1beta1 fields v1alpha1 cannot hold (convert.V1beta1Annotation).
// What it keeps of a live object's status (a Sandbox's nodeName, a pool's observedGeneration and
// rollout status) and a pool's unset replicas, progressDeadlineSeconds and RollingUpdate bounds
// go back where v1beta1 holds them, as the webhook's own conversion puts
// them, and the annotation goes: objects exported with a v1alpha1 client carry it nearly always.
// Anything else (a claim's volumeClaimTemplates, an operating mode v1alpha1 cannot say) is
// refused, since the written text does not say it and dropping it would lose it. It reports
// false when the object is refused.
func (c *converter) restoreWebhookKept(obj *yaml, group, kind string) bool {
	_, md := get(obj, "metadata")
	_, ann := get(md, "annotations")
	k, v := get(ann, convert.V1beta1Annotation)
	if k == nil {
		return true
	}
	// Removing the annotation edits both mappings: neither may be shared through an anchor.
	before := len(c.res.Findings) // a List's items share the result
	mdPath := field.NewPath("metadata")
	annPath := mdPath.Child("annotations")
	if c.checkMapping(md, mdPath) == nil || c.checkMapping(ann, annPath) == nil {
		return false
	}
	p := annPath.Key(convert.V1beta1Annotation)
	var kept map[string]json.RawMessage
	if v.Kind != kyaml.ScalarNode || json.Unmarshal([]byte(v.Value), &kept) != nil {
		c.fail(v, field.Invalid(p, v.Value, "not what the conversion webhook writes (a JSON object); remove it or export the object as v1beta1"))
		return false
	}
	restorable := restorableKept(group, kind)
	var other []string
	for key := range kept {
		if !restorable[key] {
			other = append(other, key)
		}
	}
	if len(other) > 0 {
		sort.Strings(other)
		c.fail(k, field.Forbidden(p, fmt.Sprintf("the conversion webhook keeps here v1beta1 fields this v1alpha1 copy cannot hold (%s); export the object as v1beta1 instead "+
			"(kubectl get <kind>.v1beta1.<group> -o yaml)", strings.Join(other, ", "))))
		return false
	}
	if !c.restoreScalars(obj, kept, p, v) {
		return false
	}
	if raw, ok := kept["conditions"]; ok && !c.restoreConditions(obj, raw, p.Child("conditions"), v) {
		return false
	}
	if raw, ok := kept["replicas"]; ok && !c.restorePoolReplicas(obj, raw, p.Child("replicas"), v) {
		return false
	}
	if raw, ok := kept["rollingUpdate"]; ok && !c.restoreRollingUpdate(obj, raw, p.Child("rollingUpdate"), v) {
		return false
	}
	if len(ann.Content) == 2 {
		annKey, _ := get(md, "annotations")
		c.deletePair(md, annKey, ann) // no empty map left behind, as the webhook leaves none
	} else {
		c.deletePair(ann, k, v)
	}
	return len(c.res.Findings) == before
}

// restorableKept are the keys of the webhook's annotation that a v1alpha1 object of the kind can
// give back to v1beta1.
func restorableKept(group, kind string) map[string]bool {
	restorable := map[string]bool{}
	switch {
	case group == agentsGroup && kind == "Sandbox":
		restorable["nodeName"] = true
	case group == extensionsGroup && kind == "SandboxWarmPool":
		restorable["observedGeneration"], restorable["replicas"] = true, true
		// Our extensions: the controller writes the rollout status on every pool, so nearly
		// every pool exported through v1alpha1 carries it.
		for _, k := range []string{"progressDeadlineSeconds", "rollingUpdate", "updatedReplicas", "updatedReadyReplicas", "conditions"} {
			restorable[k] = true
		}
	}
	return restorable
}

// restoreScalars puts back the kept values that are one scalar each (a Sandbox's nodeName, a
// pool's observedGeneration and rollout counts). It reports false when one is not what the
// webhook writes.
func (c *converter) restoreScalars(obj *yaml, kept map[string]json.RawMessage, p *field.Path, v *yaml) bool {
	if raw, ok := kept["nodeName"]; ok {
		var name string
		if json.Unmarshal(raw, &name) != nil {
			c.fail(v, field.Invalid(p.Child("nodeName"), string(raw), "must be a string"))
			return false
		}
		c.putScalar(obj, "status", "nodeName", name, "!!str")
	}
	if raw, ok := kept["observedGeneration"]; ok {
		var gen int64
		if json.Unmarshal(raw, &gen) != nil {
			c.fail(v, field.Invalid(p.Child("observedGeneration"), string(raw), "must be an integer"))
			return false
		}
		c.putScalar(obj, "status", "observedGeneration", strconv.FormatInt(gen, 10), "!!int")
	}
	for _, f := range []struct{ key, section string }{
		{"progressDeadlineSeconds", "spec"}, {"updatedReplicas", "status"}, {"updatedReadyReplicas", "status"},
	} {
		if raw, ok := kept[f.key]; ok {
			var n int32
			if json.Unmarshal(raw, &n) != nil {
				c.fail(v, field.Invalid(p.Child(f.key), string(raw), "must be an integer"))
				return false
			}
			c.putScalar(obj, f.section, f.key, strconv.Itoa(int(n)), "!!int")
		}
	}
	return true
}

// restorePoolReplicas puts back a pool's spec.replicas as v1beta1 had it, while the v1alpha1
// value is still the one the webhook wrote beside it (raw is {"value": …, "with": …}); a value
// changed since, through v1alpha1, wins, as it does in the webhook.
func (c *converter) restorePoolReplicas(obj *yaml, raw json.RawMessage, p *field.Path, at *yaml) bool {
	var r struct {
		Value *int32 `json:"value"`
		With  int32  `json:"with"`
	}
	if json.Unmarshal(raw, &r) != nil {
		c.fail(at, field.Invalid(p, string(raw), `must be {"value": <replicas or null>, "with": <replicas>}`))
		return false
	}
	spec := c.mapping(obj, "spec", field.NewPath("spec"))
	k, v := get(spec, "replicas")
	if k == nil || v.Kind != kyaml.ScalarNode || v.Value != strconv.Itoa(int(r.With)) {
		return true
	}
	if r.Value == nil {
		c.deletePair(spec, k, v)
	} else {
		c.setTyped(v, strconv.Itoa(int(*r.Value)), "!!int")
	}
	return true
}

// restoreRollingUpdate puts back a pool's spec.updateStrategy.rollingUpdate while the strategy's
// type is still the one the webhook wrote beside it (raw is {"value": …, "with": …}); a type
// changed since, through v1alpha1, wins, as it does in the webhook. The bounds are a mapping,
// which has no text edit of ours, so the document is re-encoded.
func (c *converter) restoreRollingUpdate(obj *yaml, raw json.RawMessage, p *field.Path, at *yaml) bool {
	var r struct {
		Value *extv1beta1.SandboxWarmPoolRollingUpdate `json:"value"`
		With  string                                   `json:"with"`
	}
	if json.Unmarshal(raw, &r) != nil {
		c.fail(at, field.Invalid(p, string(raw), `must be {"value": {"maxUnavailable": …, "maxSurge": …}, "with": <updateStrategy.type>}`))
		return false
	}
	specPath := field.NewPath("spec")
	spec := c.mapping(obj, "spec", specPath)
	strategy := c.mapping(spec, "updateStrategy", specPath.Child("updateStrategy"))
	if strategy == nil || r.Value == nil {
		return true // nothing to restore it into (or a finding says why not)
	}
	_, typ := get(strategy, "type")
	if typ == nil || typ.Kind != kyaml.ScalarNode || typ.Value != r.With {
		return true
	}
	value, err := yamlNode(r.Value)
	if err != nil {
		c.fail(at, field.Invalid(p, string(raw), fmt.Sprintf("cannot be written as YAML: %v", err)))
		return false
	}
	c.edits = append(c.edits, func() {
		c.res.reencode = true
		if _, v := get(strategy, "rollingUpdate"); v != nil {
			*v = *value
			return
		}
		strategy.Content = append(strategy.Content, &yaml{Kind: kyaml.ScalarNode, Tag: "!!str", Value: "rollingUpdate"}, value)
	})
	return true
}

// yamlNode is v, encoded as JSON, as a YAML node.
func yamlNode(v any) (*yaml, error) {
	b, err := json.Marshal(v)
	if err == nil {
		b, err = sigsyaml.JSONToYAML(b)
	}
	var doc yaml
	if err == nil {
		err = kyaml.Unmarshal(b, &doc)
	}
	if err == nil && len(doc.Content) != 1 {
		err = fmt.Errorf("%d documents", len(doc.Content))
	}
	if err != nil {
		return nil, err
	}
	return doc.Content[0], nil
}

// restoreConditions puts back a pool's status.conditions, which the webhook keeps as JSON: as a
// block list, which has no text edit, so the document is re-encoded.
func (c *converter) restoreConditions(obj *yaml, raw json.RawMessage, p *field.Path, at *yaml) bool {
	var conds []metav1.Condition
	if json.Unmarshal(raw, &conds) != nil {
		c.fail(at, field.Invalid(p, string(raw), "must be a list of conditions"))
		return false
	}
	if len(conds) == 0 {
		return true
	}
	value, err := yamlNode(conds)
	if err != nil {
		c.fail(at, field.Invalid(p, string(raw), fmt.Sprintf("cannot be written as YAML: %v", err)))
		return false
	}
	if statusKey, status := get(obj, "status"); statusKey != nil && c.checkMapping(status, field.NewPath("status")) == nil {
		return false // checkMapping said why
	}
	c.edits = append(c.edits, func() {
		c.res.reencode = true
		_, status := get(obj, "status") // as the edits before this one left it
		if status == nil {
			obj.Content = append(obj.Content, &yaml{Kind: kyaml.ScalarNode, Tag: "!!str", Value: "status"},
				&yaml{Kind: kyaml.MappingNode, Tag: "!!map", Content: []*yaml{{Kind: kyaml.ScalarNode, Tag: "!!str", Value: "conditions"}, value}})
			return
		}
		for i := 0; i+1 < len(status.Content); i += 2 {
			if status.Content[i].Value == "conditions" {
				status.Content[i+1] = value
				return
			}
		}
		status.Content = append(status.Content, &yaml{Kind: kyaml.ScalarNode, Tag: "!!str", Value: "conditions"}, value)
	})
	return true
}

// putScalar sets section.key (section is spec or status), adding the key, or the section, when
// absent.
func (c *converter) putScalar(obj *yaml, section, key, value, tag string) {
	sectionKey, m := get(obj, section)
	if m = c.checkMapping(m, field.NewPath(section)); m == nil {
		if sectionKey != nil {
			return // checkMapping said why
		}
		c.edits = append(c.edits, func() {
			pair := []*yaml{{Kind: kyaml.ScalarNode, Tag: "!!str", Value: key}, {Kind: kyaml.ScalarNode, Tag: tag, Value: value}}
			if _, added := get(obj, section); added != nil { // by an edit before this one
				added.Content = append(added.Content, pair...)
			} else {
				obj.Content = append(obj.Content, &yaml{Kind: kyaml.ScalarNode, Tag: "!!str", Value: section},
					&yaml{Kind: kyaml.MappingNode, Tag: "!!map", Content: pair})
			}
			c.res.reencode = true
		})
		return
	}
	if _, v := get(m, key); v != nil {
		if v.Kind != kyaml.ScalarNode {
			c.fail(v, field.Invalid(field.NewPath(section, key), v.Value, "must be a scalar"))
			return
		}
		c.setTyped(v, value, tag)
		return
	}
	c.prependPair(sectionKey, m, key, value, tag)
}

// list converts the items of a v1 List (what kubectl get -o yaml writes) into the List's result;
// findings name the item by its index.
func (c *converter) list(obj *yaml) {
	_, items := get(obj, "items")
	if items == nil || items.Kind != kyaml.SequenceNode {
		return
	}
	kind, ns, name := c.res.Kind, c.res.Namespace, c.res.Name
	for i, it := range items.Content {
		before := len(c.res.Findings)
		item := &converter{opts: c.opts, res: c.res}
		item.object(it)
		for _, f := range c.res.Findings[before:] {
			f.Err.Field = fmt.Sprintf("items[%d].%s", i, f.Err.Field)
		}
		c.edits = append(c.edits, item.edits...)
	}
	c.res.Kind, c.res.Namespace, c.res.Name = kind, ns, name
}

// sandbox: replicas 0 is operatingMode Suspended, 1 Running; absent stays absent (the default is
// Running). status.replicas is synthesised by upstream from operatingMode, so it is dropped.
func (c *converter) sandbox(obj *yaml) {
	specPath := field.NewPath("spec")
	spec := c.mapping(obj, "spec", specPath)
	if spec == nil {
		return
	}
	if k, _ := get(spec, "operatingMode"); k != nil {
		c.fail(k, field.Forbidden(specPath.Child("operatingMode"), "not a v1alpha1 field; is this object half-migrated? set spec.replicas instead"))
		return
	}
	if k, v := get(spec, "replicas"); k != nil {
		p := specPath.Child("replicas")
		r, err := strconv.Atoi(v.Value)
		if v.Kind != kyaml.ScalarNode || v.Tag != "!!int" || err != nil || r < 0 || r > 1 {
			c.fail(v, field.Invalid(p, v.Value, "v1alpha1 replicas is 0 or 1 (it becomes operatingMode Suspended or Running)"))
			return
		}
		r32 := int32(r)
		c.renameKey(k, "operatingMode")
		c.setScalar(v, string(convert.OperatingMode(&r32)))
	}
	if status := c.mapping(obj, "status", field.NewPath("status")); status != nil {
		if k, v := get(status, "replicas"); k != nil {
			c.deletePair(status, k, v)
		}
	}
}

// template: upstream's round-trip annotation becomes spec.volumeClaimTemplatesPolicy.
func (c *converter) template(obj *yaml) {
	md := c.mapping(obj, "metadata", field.NewPath("metadata"))
	if md == nil {
		return
	}
	annPath := field.NewPath("metadata", "annotations")
	anns := c.mapping(md, "annotations", annPath)
	if anns == nil {
		return
	}
	k, v := get(anns, convert.VolumeClaimTemplatesPolicyAnnotation)
	if k == nil {
		return
	}
	specPath := field.NewPath("spec")
	spec := c.mapping(obj, "spec", specPath)
	if spec == nil {
		c.fail(obj, field.Required(specPath, ""))
		return
	}
	if pk, _ := get(spec, "volumeClaimTemplatesPolicy"); pk != nil {
		c.fail(pk, field.Forbidden(specPath.Child("volumeClaimTemplatesPolicy"), "not a v1alpha1 field, and the "+convert.VolumeClaimTemplatesPolicyAnnotation+" annotation sets it too"))
		return
	}
	if v.Kind != kyaml.ScalarNode {
		c.fail(v, field.Invalid(annPath.Key(convert.VolumeClaimTemplatesPolicyAnnotation), v.Value, "must be a string"))
		return
	}
	policy := v.Value
	if len(anns.Content) == 2 {
		annsKey, annsValue := get(md, "annotations")
		c.deletePair(md, annsKey, annsValue)
	} else {
		c.deletePair(anns, k, v)
	}
	specKey, _ := get(obj, "spec")
	c.prependPair(specKey, spec, "volumeClaimTemplatesPolicy", policy, "!!str")
}

// claim: the template reference and warm pool policy become the one pool reference of v1beta1,
// following upstream: a named pool is that pool; "none" and "default" (and no policy, which
// defaults to "default") become shadow-pool-<template>, unless status shows a warm-adopted
// Sandbox, whose pool is its name without the last "-suffix".
func (c *converter) claim(obj *yaml) {
	specPath := field.NewPath("spec")
	before := len(c.res.Findings)
	spec := c.mapping(obj, "spec", specPath)
	if spec == nil {
		if len(c.res.Findings) == before {
			c.fail(obj, field.Required(specPath, ""))
		}
		return
	}
	if k, _ := get(spec, "warmPoolRef"); k != nil {
		c.fail(k, field.Forbidden(specPath.Child("warmPoolRef"), "not a v1alpha1 field; is this object half-migrated? set spec.sandboxTemplateRef and spec.warmpool instead"))
		return
	}
	refPath := specPath.Child("sandboxTemplateRef")
	refKey, ref := get(spec, "sandboxTemplateRef")
	ref = c.checkMapping(ref, refPath)
	if ref == nil {
		if len(c.res.Findings) == before {
			c.fail(spec, field.Required(refPath.Child("name"), "a v1alpha1 claim names its template"))
		}
		return
	}
	_, tmplNode := get(ref, "name")
	if tmplNode == nil || tmplNode.Kind != kyaml.ScalarNode || tmplNode.Value == "" {
		c.fail(ref, field.Required(refPath.Child("name"), "a v1alpha1 claim names its template"))
		return
	}
	if len(ref.Content) != 2 {
		c.fail(ref, field.Forbidden(refPath, "only name is a field of sandboxTemplateRef"))
		return
	}
	template := tmplNode.Value

	policyPath := specPath.Child("warmpool")
	policyKey, policyNode := get(spec, "warmpool")
	policy := "default"
	if policyNode != nil {
		if policyNode.Kind != kyaml.ScalarNode || policyNode.Tag != "!!str" {
			c.fail(policyNode, field.Invalid(policyPath, policyNode.Value, `must be "none", "default" or the name of a SandboxWarmPool`))
			return
		}
		policy = policyNode.Value
	}

	pool := convert.ClaimWarmPool(policy, template, c.res.Name, c.statusSandboxName(obj))
	switch {
	case extv1alpha1.WarmPoolPolicy(policy).IsSpecificPool():
		ns := c.res.Namespace
		if c.opts.PoolTemplate != nil {
			if pt, known := c.opts.PoolTemplate(ns, pool); known && pt != template {
				c.fail(tmplNode, field.Invalid(refPath.Child("name"), template, fmt.Sprintf(
					"converting to v1beta1 would lose it: a v1beta1 claim takes its template from its pool, and pool %q uses template %q; point the claim at a pool of template %q", pool, pt, template)))
				return
			} else if !known && pool != template {
				c.warn(tmplNode, field.Invalid(refPath.Child("name"), template, fmt.Sprintf(
					"dropped: a v1beta1 claim takes its template from its pool %q, which is not among the inputs; check that it uses template %q", pool, template)))
			}
		}
	case policy == "none":
		c.warn(policyNode, field.Invalid(policyPath, policy, fmt.Sprintf(
			"v1beta1 has no way to say no warm pool; converted as upstream converts it, to warmPoolRef %q; give that pool replicas: 0 so the claim never takes a warm Sandbox", pool)))
	}
	c.renameKey(refKey, "warmPoolRef")
	c.setScalar(tmplNode, pool)
	if policyKey != nil {
		c.deletePair(spec, policyKey, policyNode)
	}
}

func (c *converter) statusSandboxName(obj *yaml) string {
	_, st := get(obj, "status")
	if st == nil || st.Kind != kyaml.MappingNode {
		return ""
	}
	_, sb := get(st, "sandbox")
	if sb == nil || sb.Kind != kyaml.MappingNode {
		return ""
	}
	_, n := get(sb, "name")
	if n == nil || n.Kind != kyaml.ScalarNode {
		return ""
	}
	return n.Value
}

// get finds key in a mapping node: the key node and the value node, or nils.
func get(m *yaml, key string) (k, v *yaml) {
	if m == nil || m.Kind != kyaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// mapping returns the mapping under key, or nil when it is absent. A value migrate cannot edit
// safely (an alias, a merge key, an anchor others may refer to) is an error.
func (c *converter) mapping(parent *yaml, key string, p *field.Path) *yaml {
	_, v := get(parent, key)
	return c.checkMapping(v, p)
}

func (c *converter) checkMapping(v *yaml, p *field.Path) *yaml {
	if v == nil {
		return nil
	}
	switch {
	case v.Kind == kyaml.AliasNode:
		c.fail(v, field.Invalid(p, "*"+v.Value, "a YAML alias: migrate edits only what it can see; write this field out in full first"))
		return nil
	case v.Anchor != "":
		c.fail(v, field.Invalid(p, "&"+v.Anchor, "a YAML anchor: editing it would change every alias of it; write the aliases out in full first"))
		return nil
	case v.Kind != kyaml.MappingNode:
		c.fail(v, field.Invalid(p, v.Value, "must be a mapping"))
		return nil
	}
	if k, _ := get(v, "<<"); k != nil {
		c.fail(k, field.Invalid(p.Child("<<"), "", "a YAML merge key: migrate edits only what it can see; write the merged fields out in full first"))
		return nil
	}
	return v
}

// textEdit is one minimal change to the text of a document, at a 1-based line and column of the
// parsed text: replace old with new there, delete the line, or insert a line before it.
type textEdit struct {
	line, col  int
	old, new   string
	deleteLine bool
	insert     string
}

// setScalar plans setting a scalar's value, keeping its quoting.
func (c *converter) setScalar(n *yaml, value string) { c.setTyped(n, value, "!!str") }

// setTyped plans setting a scalar's value and tag (!!str, !!int), keeping its quoting.
func (c *converter) setTyped(n *yaml, value, tag string) {
	if n.Anchor != "" {
		c.fail(n, field.Invalid(nil, "&"+n.Anchor, "a YAML anchor: editing it would change every alias of it; write the aliases out in full first"))
		return
	}
	c.edits = append(c.edits, func() {
		old := n.Value
		n.Value = value
		n.Tag = tag
		if tag != "!!str" && n.Style != 0 {
			n.Style = 0 // a quoted number reads as a string
			c.res.reencode = true
			return
		}
		switch n.Style {
		case 0:
			c.res.edits = append(c.res.edits, textEdit{line: n.Line, col: n.Column, old: old, new: value})
		case kyaml.DoubleQuotedStyle:
			c.res.edits = append(c.res.edits, textEdit{line: n.Line, col: n.Column, old: `"` + old + `"`, new: `"` + value + `"`})
		case kyaml.SingleQuotedStyle:
			c.res.edits = append(c.res.edits, textEdit{line: n.Line, col: n.Column, old: `'` + old + `'`, new: `'` + value + `'`})
		default:
			c.res.reencode = true
		}
	})
}

// renameKey plans renaming a mapping key in place, so the key keeps its position and comments.
func (c *converter) renameKey(k *yaml, name string) {
	c.edits = append(c.edits, func() {
		old := k.Value
		k.Value = name
		if k.Style == 0 {
			c.res.edits = append(c.res.edits, textEdit{line: k.Line, col: k.Column, old: old, new: name})
		} else {
			c.res.reencode = true
		}
	})
}

// deletePair plans removing a key and its value from a mapping. In text, a pair on a line of its
// own goes with its line; a block mapping value whose pairs are all such lines goes with them.
func (c *converter) deletePair(m, k, v *yaml) {
	c.edits = append(c.edits, func() {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i] == k {
				m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
				break
			}
		}
		switch {
		case m.Style&kyaml.FlowStyle != 0:
			c.res.reencode = true
		case v.Kind == kyaml.ScalarNode && v.Line == k.Line && v.Style&(kyaml.LiteralStyle|kyaml.FoldedStyle) == 0:
			c.res.edits = append(c.res.edits, textEdit{line: k.Line, col: k.Column, deleteLine: true})
		case v.Kind == kyaml.MappingNode && v.Style&kyaml.FlowStyle == 0 && v.Line > k.Line:
			c.res.edits = append(c.res.edits, textEdit{line: k.Line, col: k.Column, deleteLine: true})
			for i := 0; i+1 < len(v.Content); i += 2 {
				pk, pv := v.Content[i], v.Content[i+1]
				if pv.Kind != kyaml.ScalarNode || pv.Line != pk.Line || pv.Style&(kyaml.LiteralStyle|kyaml.FoldedStyle) != 0 {
					c.res.reencode = true
				}
				c.res.edits = append(c.res.edits, textEdit{line: pk.Line, col: pk.Column, deleteLine: true})
			}
		default:
			c.res.reencode = true
		}
	})
}

// prependPair plans adding key: value as the first pair of the block mapping m (the value of
// parentKey), on a line of its own right after parentKey's line, at the indentation of the
// mapping's first key, so comments above that key stay with it.
func (c *converter) prependPair(parentKey, m *yaml, key, value, tag string) {
	c.edits = append(c.edits, func() {
		kn := &yaml{Kind: kyaml.ScalarNode, Tag: "!!str", Value: key}
		vn := &yaml{Kind: kyaml.ScalarNode, Tag: tag, Value: value}
		if m.Style&kyaml.FlowStyle != 0 || len(m.Content) == 0 || !plainSafe(value, tag) || parentKey == nil || parentKey.Line >= m.Content[0].Line {
			c.res.reencode = true
		} else {
			first := m.Content[0]
			c.res.edits = append(c.res.edits, textEdit{line: parentKey.Line + 1, col: first.Column,
				insert: strings.Repeat(" ", first.Column-1) + key + ": " + value})
		}
		m.Content = append([]*yaml{kn, vn}, m.Content...)
	})
}

// plainSafe reports whether a value can be written unquoted and still read back as that value
// of that tag (!!str, !!int).
func plainSafe(s, tag string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '/' || r == '_') {
			return false
		}
	}
	var v any
	if err := kyaml.Unmarshal([]byte(s), &v); err != nil {
		return false
	}
	switch v.(type) {
	case string:
		return tag == "!!str"
	case int, int64, uint64:
		return tag == "!!int"
	}
	return false
}
