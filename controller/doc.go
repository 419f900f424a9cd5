// Package controller is the thin controller of sandbox-gitops: it observes what is in the
// cluster, asks render what a pass over each object must do (render.PlanSandbox, PlanTemplate,
// PlanPool, PlanClaim), carries that plan out with server-side apply under one field manager,
// and writes status. Every decision about what an object should look like, or which object a
// claim takes, lives in render, so what `sandbox-render render` shows in a pull request is what
// this controller creates, and the plan goldens test the controller's own decisions.
//
// Each reconciler's pass is reconcileWith: begin (read the object and its namespace's render
// options), observe, run. One executor (executor.go) sends every kind's steps on their
// preconditions, plans again after a conflict that asks for it, writes the status and records
// the events; one memory (expectations.go) holds the writes the cache has not shown yet. Writes
// are only sent when they change something: an intent equal to what the field manager already
// owns is not applied, and a status equal to the stored one is not written, so a converged
// cluster costs no writes at all.
package controller
