// Package krm is the KRM function: a ResourceList in, the same list with every agent-sandbox
// object's children added (or, in validate mode, only results), following the KRM functions
// specification and kyaml's fn/framework conventions. It is pure: the items and the function
// config in, items and results out; the binary (cmd/sandbox-render) does the I/O.
package krm

import (
	"sigs.k8s.io/kustomize/kyaml/fn/framework"

	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// The functionConfig is renderconfig's SandboxRender, which the controller reads too; these are
// its names here.
type (
	// SandboxRender is the function's configuration (the ResourceList's functionConfig).
	SandboxRender = renderconfig.SandboxRender
	// SandboxRenderSpec holds the knobs of a render.
	SandboxRenderSpec = renderconfig.SandboxRenderSpec
	// Mode is what the function does with the items.
	Mode = renderconfig.Mode
)

// The functionConfig's identity, and the modes.
const (
	APIVersion   = renderconfig.APIVersion
	Kind         = renderconfig.Kind
	ModeExpand   = renderconfig.ModeExpand
	ModeValidate = renderconfig.ModeValidate
)

// ParseConfig reads a functionConfig strictly, then defaults and validates it (renderconfig.Parse).
func ParseConfig(data []byte) (*SandboxRender, error) { return renderconfig.Parse(data) }

var (
	_ framework.Defaulter = &SandboxRender{}
	_ framework.Validator = &SandboxRender{}
)
