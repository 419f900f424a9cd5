// Package e2e installs a release as users install it and checks what they would check: the
// manifests of dist/ applied server-side with no warnings, the controller running as the
// ServiceAccount install.yaml creates, the webhook serving v1alpha1, docs/example converging,
// a restart in the middle of work, deletion through the real garbage collector, and an
// uninstall that leaves nothing behind.
//
// One test body runs on two clusters (see environment): the local cluster of internal/cluster
// (`make e2e`, in CI), where the controller runs as a local process taken out of the release's
// image, and a kind cluster (`make e2e-kind`), where it runs in the cluster from the release's
// images. Only the cluster and where the controller runs differ.
//
// The tests skip unless SANDBOX_E2E_DIST names a directory `make release` wrote (the make
// targets set it), so `go test ./...` does not need a release.
package e2e
