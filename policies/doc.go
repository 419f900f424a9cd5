// Package policies holds the security decisions render applies: the secure-default
// NetworkPolicy a SandboxTemplate implies, the secure pod defaults upstream applies on the claim
// and warm pool paths, and opt-in policy packs (restricted, runtime-class,
// standalone-network-policy). Everything here is pure; violations are field errors naming the
// offending field, so the caller can name the object.
//
// The defaults are upstream's, byte for byte; the knobs exist because upstream hard-codes them
// (the router peer of issue #1409, DNS through public resolvers, the egress exceptions).
package policies
