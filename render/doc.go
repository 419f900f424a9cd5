// Package render computes, from agent-sandbox custom resources, every child object upstream's
// controllers would create and the status they would write. It is pure: no client, no clock, no
// randomness, no environment, no I/O. The controller passes in what it observed and the current
// time as values; the KRM function and the CLI pass in what is in Git. The same input gives the
// same output, whatever the input order.
//
// Parity with upstream agent-sandbox (controllers/sandbox_controller.go at 2fd412d) is the floor.
// Every place where the output deliberately differs says so in a comment and in the README.
//
// # Where to find what
//
// Files are named by the kind they render and the step of a pass they serve, so a reader who
// wants the claim opens claim_*.go:
//
//   - sandbox.go: a Sandbox's children (Pod, Service, PVCs); sandbox_plan.go: PlanSandbox, a
//     controller pass; sandbox_status.go: its status; sandbox_lifecycle.go: expiry and what
//     happens to each child; sandbox_podsync.go, sandbox_podcause.go: the Pod's metadata re-sync
//     and why a Pod is stuck.
//   - template.go: a template's NetworkPolicy; template_policywarnings.go: what a policy admits.
//   - pool.go: a pool's members; pool_plan.go: PlanPool; pool_rolling.go: a RollingUpdate's
//     bounds; pool_rollout.go: the rollout status.
//   - claim.go: a claim's Sandbox; claim_plan.go: PlanClaim; claim_warm.go, claim_adopt.go: which
//     pool member a claim takes and how; claim_status.go: its status and expiry;
//     claim_validate.go: what a claim may ask for.
//   - Shared: render.go (Render, the GitOps entry), plan.go (the Plan and Step every pass
//     returns), options.go, validate*.go (pod spec validation), hash.go, keys.go, owner.go,
//     observe.go (what the controller keeps of a Pod), upstream.go (upstream's annotations).
//
// It stays one package: the kinds' renders call one another (a claim renders a Sandbox from a
// template, a pool renders its members as Sandboxes, the plans share Plan, Step and Options),
// so subpackages would need a shared core that holds most of the package, plus exported seams
// between them for what are private helpers today. What other packages call is exported; the
// rest is not.
//
// render only accepts v1beta1 objects that have already had the CRD defaults applied (see package
// manifest, which converts and defaults at the edge).
package render
