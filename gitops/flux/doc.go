// Package flux holds the Flux health checks for the agent-sandbox kinds, so that a
// Kustomization with wait: true waits for Sandboxes, SandboxClaims and SandboxWarmPools to be
// ready, and fails on the states that need a fix, instead of treating them as ready once applied.
//
// health-check-exprs.yaml is the healthCheckExprs list of a kustomize.toolkit.fluxcd.io/v1
// Kustomization: CEL expressions per kind, with the same semantics as the Argo CD Lua checks in
// package argocd.
//
// The tests evaluate every expression with github.com/google/cel-go in the environment Flux
// builds (fluxcd/pkg runtime/cel: parsed, not type-checked; optional syntax and the strings,
// sets and encoders extensions; the object's top-level fields as the variables) and in Flux's
// order (the observedGeneration check, then inProgress, failed, current), against the objects
// in ../argocd/testdata, and compare with testdata/<kind>/<case>.expected.yaml. They also check
// that Flux and Argo CD agree on every object.
//
// There is no Go API: the artefact is the file. The package exists to keep it tested.
package flux
