// Package scale holds the controller's scale benchmarks on a real local cluster
// (internal/cluster: kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok with
// 100 fake Nodes, at the limits of upstream agent-sandbox's kwok scalability test): upstream's
// own claim scenarios with a floor in the same run, the rate the controller sustains, and
// convergence up to 10,000 Sandboxes with a restart. They are not part of `make test` or CI: run
// them with `make bench-scale`. SANDBOX_SCALE_CONTROLLER_ARGS adds flags to the controller's
// (space-separated: "--separate-watch-connection" measures a connection of its own for the
// watches), SANDBOX_SCALE_PROFILE names a directory for its CPU profiles and the API server's over
// each burst, SANDBOX_SCALE_TIMELINE a directory for a second-by-second report of each burst
// (claims created and Ready, queue depths, CPU, every request the API server served).
// SANDBOX_SCALE_RUNS (default 3) runs each claim scenario that many times, each in a cluster of
// its own, and reports every run's p99 beside its floor's. SANDBOX_SCALE_NICE=N runs the
// controllers under `nice -n N`, as if on a node of their own.
// SANDBOX_SCALE_CONTROLLERS=ours,upstream (default ours) also runs upstream agent-sandbox's own
// controller (bin/agent-sandbox-controller, v1.0.1, with its scale test's flags) on the claim
// scenarios, after ours in the same cluster, and reports its figures with an upstream- prefix, so
// that the two are compared on one machine and one cluster rather than across runs.
package scale
