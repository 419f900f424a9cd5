package main

import (
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// renderCommand renders files, directories or standard input into the objects they imply, on
// standard output: the preview a reviewer reads and a GitOps tool applies.
func renderCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var flags inputFlags
	var showExample bool
	cmd := &cobra.Command{
		Use:   "render [FILE|DIR|-]...",
		Short: "Render YAML files, directories or standard input into the objects they imply",
		Long: `Reads YAML or JSON from files, directories (every *.yaml, *.yml and *.json below them, in name
order) or - (standard input; also read when no argument is given and standard input is not a
terminal), and writes one YAML stream on standard output, sorted by kind, namespace and name: every
input object (objects of other kinds unchanged; the agent-sandbox ones only with keepSources: true,
the default) and every object they render to. v1alpha1 agent-sandbox objects are written as
v1beta1, the version the CRDs store and serve without the controller (only the fields that
differ change; --keep-source-versions writes them as they are); sandbox-render migrate rewrites such files in place.

A SandboxRender object among the inputs (a directory's render.yaml) is the configuration, as
--config would give it. The output carries a copy of the configuration in each namespace of the
agent-sandbox objects (without the function-only knobs: mode, keepSources, keepSourceVersions, now,
resources), so the controller renders them with the options of this preview once it is applied;
Kustomization files are not written out.

With no argument and a terminal on standard input, renders a bundled example Sandbox (print it with
--example).

Input is checked as the API server would check it (unknown fields, schema, defaults) and for what
would make a rendered object impossible to create; every problem of every object is reported on
standard error, and nothing is written unless the whole input renders.` + exitCodesHelp,
		Example: `  sandbox-render render docs/example
  sandbox-render render - < docs/example/template.yaml
  sandbox-render render --example | sandbox-render render`,
		RunE: func(_ *cobra.Command, args []string) error {
			if showExample {
				_, err := stdout.Write(example)
				return err
			}
			cfg, in, out, err := flags.expand(args, stdin, stderr)
			if err != nil {
				return err
			}
			return writeRender(cfg, in, out, stdout)
		},
	}
	flags.add(cmd, true)
	cmd.Flags().BoolVar(&showExample, "example", false, "print the bundled example input (the Sandbox render renders at a terminal) and exit")
	return cmd
}

// writeRender writes what render outputs of an expansion: the sources (unless the config drops
// them) and the children, with a copy of the config in each namespace when one was given, sorted.
func writeRender(cfg *renderconfig.Config, in *inputs, out []*unstructured.Unstructured, stdout io.Writer) error {
	if cfg.Spec.Mode == renderconfig.ModeValidate {
		return cli.Usagef("the SandboxRender config (%s) says mode: validate, so nothing is rendered; use sandbox-render validate, or set mode: expand", in.configFrom)
	}
	if !*cfg.Spec.KeepSources {
		kept := out[:0]
		for _, o := range out {
			if !in.source[o] || !manifest.IsAgentSandbox(o) {
				kept = append(kept, o)
			}
		}
		out = kept
	}
	if in.configFrom != "" && *cfg.Spec.KeepSources {
		// The config travels with the tree (see renderconfig's Copies); its input
		// object, if it was one, is not written, the copy is.
		var namespaces []string
		for _, o := range in.objs {
			if manifest.IsAgentSandbox(o) {
				namespaces = append(namespaces, o.GetNamespace())
			}
		}
		out = append(out, cfg.Copies(namespaces)...)
		keys := make([]manifest.CanonicalKey, len(out))
		for i, o := range out {
			keys[i] = manifest.KeyOf(o)
		}
		manifest.SortByKeys(out, keys)
	}
	b, err := manifest.EncodeKeeping(out, in.text)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	_, err = stdout.Write(b)
	return err
}
