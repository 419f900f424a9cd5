// Command sandbox-render renders agent-sandbox custom resources (Sandbox, SandboxTemplate,
// SandboxClaim, SandboxWarmPool, in v1beta1 or v1alpha1) into the Pods, PVCs and Services
// upstream's controllers would create, so they can be reviewed and applied from Git.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
