package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// validateCommand checks that the input renders and writes nothing: the check a CI job or a
// kustomize validator runs.
func validateCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var flags inputFlags
	cmd := &cobra.Command{
		Use:   "validate [FILE|DIR|-]...",
		Short: "Check that YAML files, directories or standard input render, without writing anything",
		Long: `Reads input as render does (a SandboxRender object among it is the configuration, so its policy
packs apply) and reports every problem of every agent-sandbox object on standard error, with the
file, object and field. Writes nothing on standard output; on success one line on standard error
says how many objects were checked.

validate checks files as they are. To check a kustomization as it will be built (patches,
namespaces and all), run sandbox-render build on it.` + exitCodesHelp,
		Example: `  sandbox-render validate docs/example`,
		RunE: func(_ *cobra.Command, args []string) error {
			_, in, _, err := flags.expand(args, stdin, stderr)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "%d objects checked: no problems\n", len(in.objs))
			return nil
		},
	}
	flags.add(cmd, false)
	return cmd
}
