package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// discoverCommand is the Argo CD plugin's discovery: the cmp-server runs it in an application's
// directory, in a sidecar image that may have no shell (distroless), and takes any output as a
// match.
func discoverCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "discover [DIR]",
		Short: "Print the SandboxRender config of a directory, if it has one (Argo CD plugin discovery)",
		Long: `Looks at the *.yaml and *.yml files directly in DIR (default: the current directory) and prints
the name of the first, in name order, that holds a SandboxRender function config; prints nothing
when none does. Argo CD's Config Management Plugin runs it as its discover command: any output
means the plugin builds the directory. It needs no shell, so it works in a distroless sidecar.` + exitCodesHelp,
		Example: `  cd overlays/kind && sandbox-render discover`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cli.Usagef("discover looks at one directory (default: the current one), not %d (%s)", len(args), strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if info, err := os.Stat(dir); err != nil {
				return cli.Usagef("%v", err)
			} else if !info.IsDir() {
				return cli.Usagef("%s is not a directory", dir)
			}
			var files []string
			for _, pattern := range []string{"*.yaml", "*.yml"} {
				m, err := filepath.Glob(filepath.Join(dir, pattern))
				if err != nil {
					return cli.Usagef("%v", err)
				}
				files = append(files, m...)
			}
			sort.Strings(files)
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					continue // a directory named *.yaml, or unreadable: not a config
				}
				if bytes.Contains(b, []byte(renderconfig.APIVersion)) && bytes.Contains(b, []byte("kind: "+renderconfig.Kind)) {
					_, err := fmt.Fprintln(stdout, filepath.Base(f))
					return err
				}
			}
			return nil
		},
	}
}
