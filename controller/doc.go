// Package controller is the thin controller of sandbox-gitops: it observes what is in the
// cluster, asks render what a pass over each object must do (render.PlanSandbox, PlanTemplate,
// PlanPool, PlanClaim; renderconfig.PlanStatus for a SandboxRender), carries that plan out with
// server-side apply under one field manager, and writes status. So what `sandbox-render render`
// shows in a pull request is what this controller creates, and the plan goldens test the
// controller's own decisions.
//
// The split, for a reader looking for a decision:
//   - About an object or a claim, in render, as pure functions with table tests: what every
//     object looks like and which steps a pass takes (the Plan* functions); which pool members a
//     claim may be offered given the writes still in flight (render.Offerable); whether what
//     the process knows can be trusted for a claim created while it runs
//     (render.ClaimCreatedWhileRunning); what a refused write means (render.RefusedOnMerits:
//     the object's status says why; render.StatusWriteDropped: the next event brings a pass);
//     whether the watch event of a pass's own status write needs a pass of its own
//     (render.EchoNeedsNoPass, asked of a plan made on the object the write left).
//   - About time, here, in one place: policy (policy.go) decides when background writes wait
//     behind foreground ones, when a pass comes back, and how long the cache may lag behind a
//     write; every constant is there, with the measurement that chose it, tested without an API
//     server (TestPolicy).
//   - The rest is the shell that holds state and does I/O: the reconcilers read the cache (and
//     the API server where render says the cache may lag), the gate (gate.go) holds passes and
//     events as the policy says, the expectations (expectations.go) remember this process's
//     writes the cache does not show yet, the echo waits (echoes.go) decide which watch events
//     of claims and Sandboxes need a pass, and the executor (executor.go) sends a plan's steps on
//     their preconditions, plans again after a conflict that asks for it, writes the status and
//     records the events.
//
// Writes are only sent when they change something: an intent equal to what the field manager
// already owns is not applied, and a status equal to the stored one is not written, so a
// converged cluster costs no writes at all. Nor are passes run that could only find what the
// pass before them wrote: the echo of a status write that render says needs no pass is let go,
// and the events of a claim's Sandbox or a Sandbox's children that come while its pass runs or
// its echo is awaited are left to what brings its next pass anyway.
package controller
