// Package argocd holds the Argo CD resource customizations for the agent-sandbox kinds, so that
// an Application shows a Sandbox, SandboxClaim or SandboxWarmPool as Healthy, Progressing,
// Degraded or Suspended from what upstream's controllers report, instead of Healthy because
// the object exists.
//
//   - health/*.lua: one health check per kind, each documenting its mapping from conditions and
//     reasons to an Argo CD health status, and why for the judgement calls (expiry, completion).
//   - argocd-cm-health.yaml: the argocd-cm patch that installs them under
//     resource.customizations.health.<group>_<kind>. The tests fail if its Lua differs by one
//     byte from the .lua files; `go test ./gitops/argocd -update` regenerates it.
//   - ignore-differences.yaml: resource.customizations.ignoreDifferences.<group>_<kind> entries
//     for what upstream's controllers and the API server write into objects users keep in Git.
//
// The tests run each script in github.com/yuin/gopher-lua, the interpreter Argo CD embeds, set
// up the way Argo CD sets it up (only the package, base and table libraries; the object as the
// global obj with integers as numbers), against the objects in testdata/<kind>/<case>.yaml, and
// compare with testdata/<kind>/<case>.expected.yaml. The same objects feed the Flux CEL checks
// in package flux, so both tools agree on every case.
//
// There is no Go API: the artefacts are the files. The package exists to keep them tested.
package argocd
