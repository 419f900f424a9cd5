// Package krm is the KRM function: a ResourceList in, the same list with every agent-sandbox
// object's children added (or, in validate mode, only results), following the KRM functions
// specification and kyaml's fn/framework conventions. It is pure: the items and the function
// config in, items and results out; the binary (cmd/sandbox-render) does the I/O.
package krm

import (
	"sigs.k8s.io/kustomize/kyaml/fn/framework"

	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// The functionConfig is a SandboxRender as renderconfig reads it (its Config), as the controller
// reads it too. That it defaults and validates itself as kyaml's framework expects is checked
// here rather than in renderconfig, so that the controller does not link the framework.
var (
	_ framework.Defaulter = &renderconfig.Config{}
	_ framework.Validator = &renderconfig.Config{}
)
