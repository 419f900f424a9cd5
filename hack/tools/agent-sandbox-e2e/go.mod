// Upstream agent-sandbox's own e2e suite (test/e2e and test/e2e/extensions of v1.0.1), compiled
// into test binaries by hack/tools.sh for `make e2e-upstream`. Its packages are tests of a
// dependency, which `go mod tidy` does not keep: go.sum was written with
//   go get -t sigs.k8s.io/agent-sandbox/test/e2e@v1.0.1 sigs.k8s.io/agent-sandbox/test/e2e/extensions@v1.0.1
// and must be rewritten the same way when the version changes.
module github.com/sandbox-gitops/sandbox-gitops/hack/tools/agent-sandbox-e2e

go 1.26.0

require sigs.k8s.io/agent-sandbox v1.0.1 // indirect
