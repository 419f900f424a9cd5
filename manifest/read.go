package manifest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
)

// The one YAML reader lives in manifest/yamlread, apart from the schema validation here, so that
// a program that only reads YAML (the controller reading its --render-config) does not link the
// API server's validation code: every package linked into a binary adds to its resident memory.
// These are its names in manifest.

// Node is one document of a YAML stream, parsed but not yet converted (see yamlread.Node).
type Node = yamlread.Node

// Document is one object read from a YAML stream and where it came from (see yamlread.Document).
type Document = yamlread.Document

// ReadNodes splits a YAML (or JSON) stream into its parsed documents (see yamlread.ReadNodes).
func ReadNodes(data []byte) ([]Node, error) { return yamlread.ReadNodes(data) }

// Read reads a YAML (or JSON) stream of objects, flattening Lists (see yamlread.Read).
func Read(name string, data []byte) ([]Document, error) { return yamlread.Read(name, data) }

// Parse is Read without the positions.
func Parse(name string, data []byte) ([]*unstructured.Unstructured, error) {
	return yamlread.Parse(name, data)
}

// NodeObject converts a parsed object into an unstructured object (see yamlread.NodeObject).
func NodeObject(n *kyaml.Node) (*unstructured.Unstructured, error) { return yamlread.NodeObject(n) }

// NodeValue converts a parsed node into JSON values (see yamlread.NodeValue).
func NodeValue(n *kyaml.Node) (any, error) { return yamlread.NodeValue(n) }

func describeValue(v any) string { return yamlread.DescribeValue(v) }
