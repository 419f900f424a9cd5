package upstream

import (
	"path/filepath"
	"strings"
)

// Version is the release of sigs.k8s.io/agent-sandbox whose suite runs: the one
// hack/tools/agent-sandbox-e2e requires.
const Version = "v1.0.1"

// Package is one of upstream's two e2e test packages, compiled by hack/tools.sh.
type Package struct {
	// Name is the package's name in the table.
	Name string
	// Binary is the test binary's name in bin/ (hack/tools.sh's tool name).
	Binary string
	// Env is what the run sets for it besides the kubeconfig and the artifacts directory.
	Env []string
}

// Packages are the packages `make e2e-upstream` runs, in order.
var Packages = []Package{
	{Name: "e2e", Binary: "agent-sandbox-e2e.test"},
	{Name: "extensions", Binary: "agent-sandbox-e2e-extensions.test", Env: []string{
		// The runtime-class tests skip themselves unless told which RuntimeClass to use;
		// "default" leaves the Pods' runtimeClassName unset, as on any cluster, and they
		// then check the template-pool-claim lifecycle with pause containers, which kwok
		// plays. The burst test's pools are otherwise sized from the Nodes' CPUs (64 here:
		// pools of 32, 64 and 128) and its workload sleeps 30 s, a benchmark of the runtime:
		// one pool of 4 and the pause container keep it a test of the controller.
		"SANDBOX_RUNTIME_CLASS=default",
		"SANDBOX_POOL_SIZES=4",
		"SANDBOX_WORKLOAD_SEC=0",
	}},
}

// Handling says how a run treats a listed test.
type Handling int

const (
	// NotRun tests are never started (go test's -test.skip).
	NotRun Handling = iota
	// SkipsItself tests run and skip themselves: they need a flag or a variable meant for a
	// real cluster with real images.
	SkipsItself
	// StopAt tests run alone and are stopped once their output shows Marker, the step from
	// which they need what the local cluster cannot give (a process in the Pod). What they
	// check before that step is checked here: a failure before the marker is a FAIL.
	StopAt
)

// String is the handling as the table's notes name it.
func (h Handling) String() string {
	switch h {
	case NotRun:
		return "not run"
	case SkipsItself:
		return "skips itself"
	case StopAt:
		return "stopped"
	}
	return "unknown"
}

// Listed is a test of upstream's suite that cannot run on the local cluster, and why.
type Listed struct {
	Package, Test string
	Handling      Handling
	// Marker is a StopAt test's line of output, or part of it, that says it reached the step
	// it cannot pass here.
	Marker string
	// Reason says what the test needs that the local cluster does not have.
	Reason string
}

// portForward is the line upstream's framework logs before it runs `kubectl port-forward`.
const portForward = "starting port-forward"

// noProcess is why a test that talks to a program in its Pod cannot run on kwok's fake nodes.
const noProcess = "kwok Pods run no process"

// offlineImage is why a test that needs a process in its Pod cannot run on the real node
// either: the image it runs is built from a base image and packages that this machine cannot
// reach.
const offlineImage = "cannot be built offline (PyPI unreachable, no registry)"

// onRealNode says where a listed test runs to its end instead.
const onRealNode = "; runs to its end on the real node (make e2e-upstream-node)"

// List is every test of the suite that cannot run on the local cluster (kwok's fake nodes: Pods
// are scheduled and become Running and Ready, and run nothing). `make e2e-upstream` fails when a
// test skips without being here, and when a test here passes.
var List = []Listed{
	{Package: "e2e", Test: "TestRunChromeSandbox", Handling: StopAt, Marker: portForward,
		Reason: "waits for Chrome's debug port in the Pod through kubectl port-forward: " + noProcess +
			"; its image (chrome-sandbox, Chrome on a Debian base) " + offlineImage},

	{Package: "extensions", Test: "TestChromeSandboxDensity", Handling: SkipsItself,
		Reason: "a density benchmark (-run-perf-load-test) that execs into Chrome in each Pod: " + noProcess +
			"; its image (chrome-sandbox) " + offlineImage},
	{Package: "extensions", Test: "TestPythonSandboxDensity", Handling: SkipsItself,
		Reason: "a density benchmark (-run-perf-load-test) that runs Python in each Pod: " + noProcess +
			"; its image (python-runtime-sandbox, pip packages on python:3.14-slim) " + offlineImage},
	{Package: "extensions", Test: "TestRunPythonRuntimeSandbox", Handling: StopAt, Marker: portForward,
		Reason: "sends requests to the Python runtime in the Pod through kubectl port-forward: " + noProcess +
			"; its image (python-runtime-sandbox, pip packages on python:3.14-slim) " + offlineImage},
	{Package: "extensions", Test: "TestRunPythonRuntimeSandboxClaim", Handling: StopAt, Marker: portForward,
		Reason: "sends requests to the Python runtime in the Pod through kubectl port-forward: " + noProcess +
			"; its image (python-runtime-sandbox, pip packages on python:3.14-slim) " + offlineImage},
	{Package: "extensions", Test: "TestRunPythonRuntimeSandboxWarmpool", Handling: StopAt, Marker: portForward,
		Reason: "sends requests to the Python runtime in the Pod through kubectl port-forward: " + noProcess +
			"; its image (python-runtime-sandbox, pip packages on python:3.14-slim) " + offlineImage},
	{Package: "extensions", Test: "TestRunSandboxdSandbox", Handling: StopAt, Marker: portForward,
		Reason: "sends requests to sandboxd in the Pod through kubectl port-forward: " + noProcess + onRealNode},
}

// RealNode are the tests of the suite that need a process in their Pod and can have one here:
// `make e2e-upstream-node` runs each alone, to its end, on the real node, with the images of
// RealNodeImages imported, and fails unless each passes.
var RealNode = []Listed{
	{Package: "extensions", Test: "TestRunSandboxdSandbox",
		Reason: "sandboxd's REST filesystem and gRPC ProcessService in the Pod, through kubectl port-forward"},
}

// SkipPattern is the -test.skip pattern of pkg's run of the rest: its NotRun and StopAt tests
// (StopAt tests run alone afterwards). Empty when there are none.
func SkipPattern(list []Listed, pkg string) string {
	var names []string
	for _, l := range list {
		if l.Package == pkg && (l.Handling == NotRun || l.Handling == StopAt) {
			names = append(names, l.Test)
		}
	}
	return anchored(names)
}

// StopAtTests are pkg's StopAt tests, each to run alone.
func StopAtTests(list []Listed, pkg string) []Listed {
	var out []Listed
	for _, l := range list {
		if l.Package == pkg && l.Handling == StopAt {
			out = append(out, l)
		}
	}
	return out
}

// RunPattern is the -test.run pattern that runs exactly one top-level test.
func RunPattern(test string) string { return anchored([]string{test}) }

// anchored is a go test pattern matching exactly these top-level test names (which are Go
// identifiers, so need no quoting).
func anchored(names []string) string {
	if len(names) == 0 {
		return ""
	}
	p := "^("
	for i, n := range names {
		if i > 0 {
			p += "|"
		}
		p += n
	}
	return p + ")$"
}

// Environ is the environment of pkg's test binary: base (the run's own) without anything the
// suite reads to find a cluster, images or options (so that a developer's settings do not reach
// it), then the kubeconfig, the artifacts directory, the directory for the runtime-class tests'
// reports, and pkg.Env.
func Environ(base []string, pkg Package, kubeconfig, artifacts string) []string {
	var out []string
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if suiteReads(name) {
			continue
		}
		out = append(out, kv)
	}
	out = append(out,
		"KUBECONFIG="+kubeconfig,
		"ARTIFACTS="+artifacts,
		"SANDBOX_REPORT_DIR="+filepath.Join(artifacts, "reports"),
	)
	return append(out, pkg.Env...)
}

// suiteReads is a variable upstream's suite (v1.0.1) reads.
func suiteReads(name string) bool {
	switch name {
	case "KUBECONFIG", "ARTIFACTS", "IMAGE_TAG", "IMAGE_PREFIX", "PYTHON_SANDBOX_IMAGE", "BENCHMARK_SCRIPT_PATH", "WARM_POOL_SIZE":
		return true
	}
	return strings.HasPrefix(name, "SANDBOX_")
}
