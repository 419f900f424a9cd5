package kbuild

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// kustomize reads every resource file with kyaml's kio.ByteReader, which "de-anchors" each
// document: it copies every mapping and sets its fields again one by one, each set a linear search
// of the copy, so a mapping of k keys costs k² (a ConfigMap with 100,000 data keys took 533 s).
// Printing a resource costs k² again (go-yaml v3's duplicate-key check in RNode.MarshalJSON).
// kustomize offers no other reader, so a build hands it wide mappings elided: each flat mapping
// of at least elideMinKeys strings outside metadata is replaced, in the text kustomize reads, by
// a one-entry placeholder naming it, and put back when the object is printed. A flat mapping of
// strings (ConfigMap and Secret data) is something kustomize's transformers either leave alone
// or write into, and the build checks which: it uses the result only when every placeholder
// comes out whole, at the path it went in, and every kustomization of the tree uses only
// transformations that cannot read such a mapping (no patches, replacements, vars, generators
// or functions other than SandboxRender); otherwise it builds again without elision.

// elideMinKeys is the size from which a mapping is elided: below it kustomize's cost is small.
var elideMinKeys = 1000

// elidedKey is the placeholder's key; its value is a token unique to the build and the mapping.
const elidedKey = "sandbox-gitops.dev/elided"

// elider elides the wide mappings of the files a build reads and remembers them.
type elider struct {
	// nonce makes this build's tokens impossible to write in advance, so a placeholder that
	// comes out of the build is one this build made.
	nonce string
	mu    sync.Mutex
	byKey map[string]*elision
}

// elision is one elided mapping: where it was and what it held.
type elision struct {
	apiVersion, kind string
	path             string
	value            map[string]any
}

func newElider() (*elider, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return &elider{nonce: hex.EncodeToString(b), byKey: map[string]*elision{}}, nil
}

// file returns the text kustomize reads for a file: the file itself, or with its wide mappings
// elided. A file that is not a readable stream of objects is returned as it is, for kustomize to
// judge.
func (e *elider) file(path string, b []byte) []byte {
	if bytes.Count(b, []byte{':'}) < elideMinKeys || slices.Contains(KustomizationFileNames, filepath.Base(path)) {
		return b
	}
	docs, err := manifest.ReadNodes(b)
	if err != nil {
		return b
	}
	changed := make([]bool, len(docs))
	found := false
	for i, d := range docs {
		apiVersion, kind := scalarField(d.Node, "apiVersion"), scalarField(d.Node, "kind")
		if apiVersion == "" || kind == "" || strings.HasSuffix(kind, "List") || !elidable(apiVersion, kind) {
			continue
		}
		for j := 0; j+1 < len(d.Content); j += 2 {
			k := d.Content[j]
			if k.Kind != kyaml.ScalarNode || k.Value == "metadata" || k.Value == "apiVersion" || k.Value == "kind" {
				continue
			}
			if e.walk(apiVersion, kind, fieldSegment(k.Value), d.Content[j+1]) {
				changed[i], found = true, true
			}
		}
	}
	if !found {
		return b
	}
	var out bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		text := d.Text
		if changed[i] || text == nil {
			s, err := kyaml.NewRNode(d.Node).String()
			if err != nil {
				return b
			}
			text = []byte(s)
		}
		out.Write(text)
		if len(text) > 0 && text[len(text)-1] != '\n' {
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// elidable tells whether objects of a kind may have mappings elided: not the agent-sandbox kinds
// and SandboxRender configs, which the render reads and copies into what it makes.
func elidable(apiVersion, kind string) bool {
	group, _, _ := strings.Cut(apiVersion, "/")
	switch {
	case group == "agents.x-k8s.io" || group == "extensions.agents.x-k8s.io":
		return false
	case apiVersion == renderconfig.APIVersion && kind == renderconfig.Kind:
		return false
	}
	return true
}

// walk elides the wide flat mappings at and below n (path is n's path in the object) and reports
// whether it elided any.
func (e *elider) walk(apiVersion, kind, path string, n *kyaml.Node) bool {
	if n.Anchor != "" {
		return false // something may refer to it; kustomize copies it there
	}
	switch n.Kind {
	case kyaml.SequenceNode:
		found := false
		for i, c := range n.Content {
			found = e.walk(apiVersion, kind, path+indexSegment(i), c) || found
		}
		return found
	case kyaml.MappingNode:
		if value, ok := flatStrings(n); ok {
			token := e.nonce + "-" + strconv.Itoa(e.add(&elision{apiVersion: apiVersion, kind: kind, path: path, value: value}))
			n.Content = []*kyaml.Node{
				{Kind: kyaml.ScalarNode, Tag: "!!str", Value: elidedKey},
				{Kind: kyaml.ScalarNode, Tag: "!!str", Value: token, Style: kyaml.DoubleQuotedStyle},
			}
			return true
		}
		found := false
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := n.Content[j]; k.Kind == kyaml.ScalarNode {
				found = e.walk(apiVersion, kind, path+fieldSegment(k.Value), n.Content[j+1]) || found
			}
		}
		return found
	}
	return false
}

// A path in an object is written as its segments, [k:"key"] and [i:N], one after the other.
func fieldSegment(key string) string { return "[k:" + strconv.Quote(key) + "]" }

func indexSegment(i int) string { return "[i:" + strconv.Itoa(i) + "]" }

// empty tells whether nothing was elided.
func (e *elider) empty() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.byKey) == 0
}

func (e *elider) add(el *elision) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := len(e.byKey)
	e.byKey[e.nonce+"-"+strconv.Itoa(id)] = el
	return id
}

// flatStrings reads a mapping of at least elideMinKeys entries whose keys and values are all
// strings (no aliases, anchors, merge keys, other tags, or repeated keys: kustomize must see
// those to treat them as it does).
func flatStrings(n *kyaml.Node) (map[string]any, bool) {
	if len(n.Content)/2 < elideMinKeys {
		return nil, false
	}
	out := make(map[string]any, len(n.Content)/2)
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		if !plainString(k) || !plainString(v) {
			return nil, false
		}
		if _, dup := out[k.Value]; dup {
			return nil, false
		}
		out[k.Value] = v.Value
	}
	return out, true
}

func plainString(n *kyaml.Node) bool {
	return n.Kind == kyaml.ScalarNode && n.Anchor == "" && n.ShortTag() == kyaml.NodeTagString
}

func scalarField(n *kyaml.Node, key string) string {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if k, v := n.Content[j], n.Content[j+1]; k.Kind == kyaml.ScalarNode && k.Value == key && v.Kind == kyaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}

// safeKustomization lists the fields of a kustomization whose transformations never read a flat
// mapping of strings outside metadata; transformers and generators are allowed only as
// SandboxRender configs.
var safeKustomization = map[string]bool{
	"apiVersion": true, "kind": true, "metadata": true, "resources": true, "bases": true, "components": true,
	"namespace": true, "namePrefix": true, "nameSuffix": true, "commonLabels": true, "labels": true,
	"commonAnnotations": true, "images": true, "replicas": true, "buildMetadata": true, "sortOptions": true,
	"transformers": true, "generators": true,
}

// treeIsSafe checks every kustomization a build read: why elision may have changed the result,
// or "".
func treeIsSafe(read []source) string {
	contents := make(map[string][]byte, len(read))
	for _, s := range read {
		contents[s.path] = s.data
	}
	for _, s := range read {
		if !slices.Contains(KustomizationFileNames, filepath.Base(s.path)) {
			continue
		}
		var k map[string]any
		if err := yaml.Unmarshal(s.data, &k); err != nil {
			return fmt.Sprintf("%s: %v", s.path, err)
		}
		for field, v := range k {
			if !safeKustomization[field] {
				return fmt.Sprintf("%s has %s", s.path, field)
			}
			if field != "transformers" && field != "generators" {
				continue
			}
			list, _ := v.([]any)
			for _, entry := range list {
				p, ok := entry.(string)
				if !ok || strings.Contains(p, "\n") {
					return fmt.Sprintf("%s has an inline %s entry", s.path, field)
				}
				if b, read := contents[abs(filepath.Join(filepath.Dir(s.path), p))]; !read || !isSandboxRenderConfig(b) {
					return fmt.Sprintf("%s lists %s under %s, which is not a SandboxRender config", s.path, p, field)
				}
			}
		}
	}
	return ""
}

// restore checks the objects of a build made from elided files and tells each object which
// placeholders to put back; it returns why the result cannot be used, or "".
func (e *elider) restore(r *Result) string {
	for i := range r.Objects {
		o := &r.Objects[i]
		if o.res == nil {
			if s := findString(o.obj, e.nonce); s != "" {
				return "an object the render made holds a placeholder"
			}
			continue
		}
		n := o.res.YNode()
		apiVersion, kind := scalarField(n, "apiVersion"), scalarField(n, "kind")
		var why string
		var walk func(path string, n *kyaml.Node)
		walk = func(path string, n *kyaml.Node) {
			if why != "" {
				return
			}
			switch n.Kind {
			case kyaml.ScalarNode:
				if strings.Contains(n.Value, e.nonce) {
					why = fmt.Sprintf("%s %s holds a placeholder at %s that is not whole", kind, o.ID.Name, path)
				}
			case kyaml.SequenceNode:
				for i, c := range n.Content {
					walk(path+indexSegment(i), c)
				}
			case kyaml.MappingNode:
				if len(n.Content) == 2 && n.Content[0].Kind == kyaml.ScalarNode && n.Content[0].Value == elidedKey &&
					strings.Contains(n.Content[1].Value, e.nonce) {
					el := e.byKey[n.Content[1].Value]
					if el == nil || el.path != path || el.apiVersion != apiVersion || el.kind != kind {
						why = fmt.Sprintf("%s %s holds a placeholder at %s that is not the one put there", kind, o.ID.Name, path)
						return
					}
					o.restore = append(o.restore, el)
					return
				}
				for j := 0; j+1 < len(n.Content); j += 2 {
					k := n.Content[j]
					if strings.Contains(k.Value, e.nonce) {
						why = fmt.Sprintf("%s %s holds a placeholder key at %s", kind, o.ID.Name, path)
						return
					}
					walk(path+fieldSegment(k.Value), n.Content[j+1])
				}
			}
		}
		walk("", n)
		if why != "" {
			return why
		}
	}
	return ""
}

// findString finds a key or string value of an unstructured value containing s.
func findString(v any, s string) string {
	switch t := v.(type) {
	case string:
		if strings.Contains(t, s) {
			return t
		}
	case []any:
		for _, e := range t {
			if f := findString(e, s); f != "" {
				return f
			}
		}
	case map[string]any:
		for k, e := range t {
			if strings.Contains(k, s) {
				return k
			}
			if f := findString(e, s); f != "" {
				return f
			}
		}
	}
	return ""
}

// restoredYAML is Resource.AsYAML of the object as it would be with its elided mappings: the same
// steps (YAML to a map with go-yaml v3, JSON, then sigs.k8s.io/yaml's JSONToYAML), with each
// mapping set into the map at its path before the JSON.
func restoredYAML(o Object) ([]byte, error) {
	s, err := o.res.RNode.String()
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := kyaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	for _, el := range o.restore {
		if err := setAt(m, el.path, el.value); err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.ID.Kind, o.ID.Name, err)
		}
	}
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// setAt sets value at a path written by walk.
func setAt(m map[string]any, path string, value any) error {
	var cur any = m
	segs := splitPath(path)
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case strings.HasPrefix(seg, "k:"):
			key, err := strconv.Unquote(seg[2:])
			mm, ok := cur.(map[string]any)
			if err != nil || !ok {
				return fmt.Errorf("no mapping at %s", path)
			}
			if last {
				mm[key] = value
				return nil
			}
			cur = mm[key]
		case strings.HasPrefix(seg, "i:"):
			idx, err := strconv.Atoi(seg[2:])
			s, ok := cur.([]any)
			if err != nil || !ok || idx >= len(s) {
				return fmt.Errorf("no list at %s", path)
			}
			if last {
				s[idx] = value
				return nil
			}
			cur = s[idx]
		}
	}
	return fmt.Errorf("empty path")
}

// splitPath splits a path written by walk into its segments (without the brackets).
func splitPath(path string) []string {
	var out []string
	for path != "" {
		if !strings.HasPrefix(path, "[") {
			return nil
		}
		end := segmentEnd(path)
		if end < 0 {
			return nil
		}
		out = append(out, path[1:end])
		path = path[end+1:]
	}
	return out
}

// segmentEnd finds the "]" closing the segment at the start of path, past a quoted key.
func segmentEnd(path string) int {
	if strings.HasPrefix(path, "[k:") {
		q, err := strconv.QuotedPrefix(path[3:])
		if err != nil || len(path) <= 3+len(q) || path[3+len(q)] != ']' {
			return -1
		}
		return 3 + len(q)
	}
	return strings.IndexByte(path, ']')
}
