package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/krm"
)

// buildLong is build's help, before the exit codes.
const buildLong = `Builds the kustomization in DIR with sigs.k8s.io/kustomize/api, with the options of
kustomize build --enable-alpha-plugins --enable-exec, and writes the same bytes kustomize would on
standard output; no kustomize binary is needed. SandboxRender function configs in the tree run as
this executable, whatever path their exec annotation names. Other exec functions in the tree run as
kustomize would run them.

When the SandboxRender transformer is the last transformer of DIR's kustomization (the documented
layout), the rest of the tree is built by kustomize and the render runs in process in one pass:
linear in the number of objects, where kustomize's handling of a function's output is quadratic.
Where that cannot give kustomize's bytes (validators, vars, buildMetadata other than
originAnnotations, non-legacy sortOptions, local-config objects, or names changed by namePrefix,
nameSuffix or hashed generators), the build runs the function as kustomize does and says so on
standard error. Either way problems name the file (as DIR was given), the document and the line,
as render's do, even without originAnnotations.

A tree holding agent-sandbox objects but no SandboxRender transformer, or a SandboxRender config
listed under resources:, is an error: the output would carry custom resources with nothing
rendered.

With --output FILE the stream goes to FILE instead (a file, never a directory). With --output-dir,
writes one file per object (named as kustomize build -o names them) and a kustomization.yaml listing
them, for the rendered-manifests pattern (Flux, or Argo CD without plugins), and lists them in
` + kbuild.MarkerFile + `. A later run replaces and removes only the files listed there, so a deleted
object does not linger; a directory holding any other file, or any file of the kustomization's own
tree, is refused, as is an existing --output file sandbox-render did not write.`

// buildFlags are build's flags: where the result goes, and whether to take the slow path.
type buildFlags struct {
	outputDir, output string
	slow              bool
}

// buildCommand builds a kustomization with the render in process (kbuild), so that a tree renders
// without a kustomize binary and without kustomize's quadratic handling of a function's output.
func buildCommand(stdout, stderr io.Writer) *cobra.Command {
	var f buildFlags
	cmd := &cobra.Command{
		Use:   "build DIR",
		Short: "Build a kustomization with the render function in process, as kustomize build --enable-exec would",
		Long:  buildLong + exitCodesHelp,
		Example: `  sandbox-render build overlays/production
  sandbox-render build overlays/production --output-dir deploy/production
  sandbox-render build docs/example -o example.yaml`,
		Args: buildArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return f.run(args[0], stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&f.outputDir, "output-dir", "", "write one file per object and a kustomization.yaml into this directory instead of standard output")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "write the YAML stream to this file instead of standard output")
	cmd.Flags().BoolVar(&f.slow, "no-fast-path", false, "run the SandboxRender function as kustomize runs it even where the one-pass render applies")
	return cmd
}

// buildArgs requires exactly one directory, saying what to do otherwise.
func buildArgs(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return cli.Usagef("build needs the kustomization directory to build, e.g. sandbox-render build docs/example")
	case len(args) > 1:
		return cli.Usagef("build builds one kustomization directory, not %d (%s); run it once per directory", len(args), strings.Join(args, " "))
	}
	return nil
}

// run builds dir and writes the result where the flags say.
func (f *buildFlags) run(dir string, stdout, stderr io.Writer) error {
	if f.output != "" && f.outputDir != "" {
		return cli.Usagef("--output and --output-dir exclude each other")
	}
	self, err := os.Executable()
	if err != nil {
		return cli.Usagef("locating this executable: %v", err)
	}
	res, err := kbuild.Build(dir, self, kbuild.Options{NoFastPath: f.slow})
	if err != nil {
		var fe *kbuild.FindingsError
		if errors.As(err, &fe) {
			fmt.Fprint(stderr, fe.Report)
			return &cli.ExitError{Code: cli.ExitFailure, Err: errors.New("the input has problems; nothing was written")}
		}
		return cli.Usagef("building %s: %v", dir, err)
	}
	fmt.Fprint(stderr, krm.Format(res.Warnings))
	if res.FallbackReason != "" {
		fmt.Fprintf(stderr, "sandbox-render: note: the render runs as kustomize runs it, which is slow on large trees: %s\n", res.FallbackReason)
	}
	crs, configs := res.AgentSandboxObjects()
	switch {
	case configs > 0:
		return cli.Usagef("building %s: a SandboxRender config is among the output objects, so it was taken as a resource and nothing was rendered; list its file under transformers:, not resources:", dir)
	case crs > 0 && !res.Rendered:
		return cli.Usagef("building %s: %d agent-sandbox objects but no SandboxRender transformer in the tree, so nothing was rendered; add a render.yaml (see sandbox-render --help) and list it last under transformers:", dir, crs)
	}
	return f.write(res, stdout, stderr)
}

// write writes a build's result where the flags say: a directory, a file or standard output.
func (f *buildFlags) write(res *kbuild.Result, stdout, stderr io.Writer) error {
	switch {
	case f.outputDir != "":
		written, removed, err := kbuild.WriteDir(f.outputDir, res)
		if err != nil {
			return cli.Usagef("writing %s: %v", f.outputDir, err)
		}
		for _, r := range removed {
			fmt.Fprintf(stderr, "removed %s\n", r)
		}
		fmt.Fprintf(stderr, "wrote %d files to %s\n", len(written), f.outputDir)
		return nil
	case f.output != "":
		if err := kbuild.WriteFile(f.output, res); err != nil {
			return cli.Usagef("writing %s: %v", f.output, err)
		}
		fmt.Fprintf(stderr, "wrote %d objects to %s\n", len(res.Objects), f.output)
		return nil
	}
	b, err := res.YAML()
	if err != nil {
		return cli.Usagef("%v", err)
	}
	_, err = stdout.Write(b)
	return err
}
