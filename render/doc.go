// Package render computes, from agent-sandbox custom resources, every child object upstream's
// controllers would create and the status they would write. It is pure: no client, no clock, no
// randomness, no environment, no I/O. The controller passes in what it observed and the current
// time as values; the KRM function and the CLI pass in what is in Git. The same input gives the
// same output, whatever the input order.
//
// Parity with upstream agent-sandbox (controllers/sandbox_controller.go at 2fd412d) is the floor.
// Every place where the output deliberately differs says so in a comment and in the README.
//
// render only accepts v1beta1 objects that have already had the CRD defaults applied (see package
// manifest, which converts and defaults at the edge).
package render
