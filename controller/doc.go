// Package controller is the thin controller of sandbox-gitops: it observes what is in the
// cluster, asks render what a pass over each object must do, applies exactly that with
// server-side apply under one field manager, prunes what it owns and no longer wants, and writes
// status. Every decision about what an object should look like lives in render, so what
// `sandbox-render render` shows in a pull request is what this controller creates.
//
// Each reconciler reads as a pipeline: read from the cache, plan (render), confirm creates
// against the API server, apply, prune, write status. Writes are only sent when they change
// something: an intent equal to what the field manager already owns is not applied, and a status
// equal to the stored one is not written, so a converged cluster costs no writes at all.
package controller
