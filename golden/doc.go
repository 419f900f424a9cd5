// Package golden holds the golden-file tests of the whole render: one directory per case under
// testdata/, with the input manifests, an optional config.yaml and the expected output or
// errors. `go test ./golden -update` (make golden) rewrites the expectations; a plain run never
// writes. Every case is also rendered with its input shuffled and twice, and a render case's
// output is fed back in to prove idempotency.
package golden
