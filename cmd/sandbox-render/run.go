package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/internal/version"
)

//go:embed example.yaml
var example []byte

const exitCodesHelp = `

Exit codes (the same for every command):
  0  done, no problems
  1  the input has problems: YAML that cannot be read (syntax, a duplicate key, aliases that
     expand too far, nesting too deep, not UTF-8), or objects that do not render, each reported
     with its file and document (and object and field); nothing written
  2  usage, configuration (--config, a SandboxRender's spec), kustomize or I/O error, or
     nothing to do; nothing written
As the KRM function (fn, or no command with a ResourceList on standard input) the codes are the
same, but the ResourceList is written on 1 and 2 as well: see sandbox-render fn --help.`

const rootLong = `sandbox-render renders agent-sandbox custom resources (Sandbox, SandboxTemplate, SandboxClaim and
SandboxWarmPool, v1beta1 or v1alpha1) into the objects upstream's controllers would create: for every
template its NetworkPolicy, for every pool its member Sandboxes, for every claim its Sandbox, and for
every Sandbox its Pod, PVCs and headless Service. So they can be reviewed in Git and applied by
GitOps tools.

Commands: render (files to objects, on standard output), validate (check only, writing nothing),
build (a kustomization, as kustomize build --enable-alpha-plugins --enable-exec would), fn (the KRM
function), discover (the Argo CD plugin's discovery), migrate (rewrite v1alpha1 files as v1beta1, in
place).

Run with no command and a ResourceList on standard input (as kustomize runs exec functions) it is
the KRM function, configured by a SandboxRender functionConfig; in a kustomization, list its file
last under transformers:. The exec path is relative to the directory of the kustomization that
lists the config (sandbox-render build ignores it and runs itself):

  apiVersion: render.sandbox-gitops.dev/v1alpha1
  kind: SandboxRender
  metadata:
    name: render
    annotations:
      config.kubernetes.io/function: |
        exec:
          path: ../../bin/sandbox-render
  spec:
    mode: expand            # or validate: results only, items unchanged
    keepSources: true       # false emits only what the custom resources render to
    keepSourceVersions: false  # true writes v1alpha1 sources as they are, not converted to v1beta1
    clusterDomain: cluster.local
    allowedLabelDomains: [sandbox.users.io]
    policies:
      networkPolicy: {dns: public-resolvers, routers: [...], extraEgressExceptions: [...]}
      packs: {restricted: false, runtimeClass: {allowed: [gvisor]}, standaloneNetworkPolicy: false}` + exitCodesHelp

// newRoot is the sandbox-render command: its subcommands, and the KRM function when run with no
// command and a ResourceList on standard input, as kustomize runs exec functions.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "sandbox-render",
		Short:         "Render agent-sandbox custom resources into the objects they imply",
		Long:          rootLong,
		Version:       version.String("sandbox-render"),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
			}
			return cli.Usagef("%s\nRun 'sandbox-render --help' for usage.", msg)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if terminal(stdin) {
				return cli.Usagef("no command given and standard input is a terminal; see sandbox-render --help")
			}
			data, err := io.ReadAll(stdin)
			if err != nil {
				return cli.Usagef("reading standard input: %v", err)
			}
			if len(bytes.TrimSpace(data)) == 0 {
				return cli.Usagef("no command given and standard input is empty; see sandbox-render --help")
			}
			if !bytes.Contains(data, []byte("ResourceList")) {
				return cli.Usagef("no command given and standard input is not a KRM ResourceList; see sandbox-render --help")
			}
			return runFunction(data, stdout, stderr, "")
		},
	}
	root.SuggestionsMinimumDistance = 2
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(fnCommand(stdin, stdout, stderr), renderCommand(stdin, stdout, stderr),
		validateCommand(stdin, stdout, stderr), buildCommand(stdout, stderr), discoverCommand(stdout),
		migrateCommand(stdout, stderr))
	return root
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(newRoot(stdin, stdout, stderr), args, stderr)
}
