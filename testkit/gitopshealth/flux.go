package gitopshealth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// kstatus results a custom health check can produce (fluxcd/cli-utils kstatus/status).
const (
	Current    = "Current"
	InProgress = "InProgress"
	Failed     = "Failed"
	// Unknown is what kstatus reports when evaluating the expressions returns an error.
	Unknown = "Unknown"
)

// FluxSnippet is the project's healthCheckExprs block, relative to the repository root.
const FluxSnippet = "gitops/flux/health-check-exprs.yaml"

// CustomHealthCheck is one entry of a Kustomization's spec.healthCheckExprs
// (fluxcd/pkg apis/kustomize CustomHealthCheck).
type CustomHealthCheck struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

// Snippet is the file FluxSnippet.
type Snippet struct {
	HealthCheckExprs []CustomHealthCheck `json:"healthCheckExprs"`
}

// ReadSnippet reads and strictly decodes a healthCheckExprs file.
func ReadSnippet(path string) (Snippet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Snippet{}, err
	}
	var s Snippet
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return Snippet{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// FluxEnv is the CEL environment fluxcd/pkg runtime/cel NewExpression builds for health
// checks: no declared variables (the expressions are parsed, not type-checked, because not every
// custom resource has the usual top-level fields), optional types, and the strings, sets and
// encoders extensions. The object's top-level fields are bound as variables at evaluation, so
// the expressions say status.conditions, not self.status.conditions.
func FluxEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
}

// FluxEvaluator is one entry of the snippet, parsed into programs as Flux's StatusEvaluator does.
type FluxEvaluator struct {
	current, inProgress, failed cel.Program
}

// NewFluxEvaluator parses the entry's expressions in env.
func NewFluxEvaluator(env *cel.Env, hc CustomHealthCheck) (*FluxEvaluator, error) {
	if hc.Current == "" {
		return nil, errors.New("current is required")
	}
	var e FluxEvaluator
	for _, x := range []struct {
		expr string
		dst  *cel.Program
	}{
		{hc.Current, &e.current},
		{hc.InProgress, &e.inProgress},
		{hc.Failed, &e.failed},
	} {
		if x.expr == "" {
			continue
		}
		ast, iss := env.Parse(x.expr)
		if iss.Err() != nil {
			return nil, fmt.Errorf("parse %q: %w", x.expr, iss.Err())
		}
		prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
		if err != nil {
			return nil, fmt.Errorf("program %q: %w", x.expr, err)
		}
		*x.dst = prg
	}
	return &e, nil
}

// Evaluate returns the kstatus result Flux computes for obj (StatusEvaluator.Evaluate, RFC 0009):
// a status.observedGeneration that differs from metadata.generation is InProgress outright;
// otherwise inProgress, failed and current are evaluated in that order and the first true one
// wins; none true is InProgress. An evaluation error is Unknown, as kstatus reports it.
func (e *FluxEvaluator) Evaluate(obj *unstructured.Unstructured) (string, error) {
	observed, ok, err := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if err == nil && ok {
		generation, ok, err := unstructured.NestedInt64(obj.Object, "metadata", "generation")
		if err == nil && ok && observed != generation {
			return InProgress, nil
		}
	}
	for _, x := range []struct {
		prg    cel.Program
		result string
	}{
		{e.inProgress, InProgress},
		{e.failed, Failed},
		{e.current, Current},
	} {
		if x.prg == nil {
			continue
		}
		val, _, err := x.prg.ContextEval(context.Background(), obj.Object)
		if err != nil {
			return Unknown, err
		}
		b, ok := val.(types.Bool)
		if !ok {
			return Unknown, fmt.Errorf("expression returned %s, want bool", val.Type())
		}
		if b {
			return x.result, nil
		}
	}
	return InProgress, nil
}

// FluxOf evaluates the project's snippet, read from the repository at root, for obj's kind.
func FluxOf(root string, obj *unstructured.Unstructured) (string, error) {
	s, err := ReadSnippet(filepath.Join(root, FluxSnippet))
	if err != nil {
		return "", err
	}
	env, err := FluxEnv()
	if err != nil {
		return "", err
	}
	gk := obj.GroupVersionKind().GroupKind()
	for _, hc := range s.HealthCheckExprs {
		if schema.FromAPIVersionAndKind(hc.APIVersion, hc.Kind).GroupKind() != gk {
			continue
		}
		e, err := NewFluxEvaluator(env, hc)
		if err != nil {
			return "", fmt.Errorf("%s: %w", gk, err)
		}
		return e.Evaluate(obj)
	}
	return "", fmt.Errorf("%s has no entry for %s", FluxSnippet, gk)
}
