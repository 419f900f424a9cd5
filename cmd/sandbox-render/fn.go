package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/krm"
)

// fnExitCodesHelp is exitCodesHelp for the function, which writes its ResourceList even when it
// fails, as the KRM functions specification asks.
const fnExitCodesHelp = `

Exit codes (the same as every command's):
  0  done: the ResourceList is written, with the rendered objects and any warnings as results
  1  the input has problems (YAML that cannot be read, or objects that do not render): the
     ResourceList is still written, items unchanged, with one error result per problem
  2  the functionConfig is invalid: the ResourceList is still written, items unchanged, with
     the error as a result; or standard input is empty or unreadable: nothing written`

// fnCommand is the KRM function by name, for kustomize configurations and people that would
// rather say so than rely on a ResourceList on standard input.
func fnCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var resultsDir string
	cmd := &cobra.Command{
		Use:   "fn",
		Short: "Run as a KRM function: a ResourceList on standard input, the result on standard output",
		Long: `Runs as a KRM function (the same as running with no command and a ResourceList on standard
input) and writes a ResourceList on standard output: the items, with every object the agent-sandbox
items render to added (mode: expand), or unchanged (mode: validate); the functionConfig; and the
results. Items that are not agent-sandbox objects pass through byte for byte. Problems are results
with severity, resourceRef, field and file (the file comes from the items' path annotations, or from
kustomize's origin annotations with buildMetadata: [originAnnotations]), also printed one a line on
standard error. On a problem the list is still written, with the items unchanged and the results,
as the KRM functions specification asks; the exit code is 1, or 2 when the functionConfig itself is
invalid.` + fnExitCodesHelp,
		Example: `  printf 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n' | sandbox-render fn`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return cli.Usagef("reading standard input: %v", err)
			}
			return runFunction(data, stdout, stderr, resultsDir)
		},
	}
	// sandbox-render build passes it when kustomize runs the function, to place the findings
	// itself (see kbuild.ResultsDirFlag); not for people, so not in --help.
	cmd.Flags().StringVar(&resultsDir, kbuild.ResultsDirFlag, "", "write the results of a failure into this directory instead of standard error")
	cmd.Flags().Lookup(kbuild.ResultsDirFlag).Hidden = true
	return cmd
}

// runFunction runs the KRM function on a ResourceList. With resultsDir, the results of a failure
// on the input are written there, for sandbox-render build to report, and not printed.
func runFunction(data []byte, stdout, stderr io.Writer, resultsDir string) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return cli.Usagef("standard input is empty; the function reads a ResourceList there")
	}
	ok, err := krm.RunResults(bytes.NewReader(data), stdout)
	if err == nil {
		// kustomize drops a successful function's results: a build hands its warnings over.
		if warnings := severity(ok, framework.Warning); resultsDir != "" && len(warnings) > 0 {
			if err := kbuild.WriteResults(resultsDir, warnings); err != nil {
				return cli.Usagef("writing the results: %v", err)
			}
		}
		return nil
	}
	var results framework.Results
	if errors.As(err, &results) {
		if resultsDir != "" && results.ExitCode() != 0 && !configError(results) {
			if err := kbuild.WriteResults(resultsDir, results); err == nil {
				return &cli.ExitError{Code: cli.ExitFailure} // reported by the build
			}
		}
		fmt.Fprint(stderr, krm.Format(results))
		if results.ExitCode() == 0 {
			return nil
		}
		if configError(results) {
			// The results are written for kustomize; the exit code follows the rule of every
			// command: a configuration error is 2, not a problem of the input.
			return cli.Usagef("the functionConfig is invalid")
		}
		if unfiled(results) {
			return &cli.ExitError{Code: cli.ExitFailure, Err: errors.New("the input has problems; no item names its file " +
				"(kustomize names them with buildMetadata: [originAnnotations] in the kustomization)")}
		}
		return &cli.ExitError{Code: cli.ExitFailure, Err: errors.New("the input has problems")}
	}
	return cli.Usagef("%v", err)
}

// severity are the results of that severity.
func severity(results framework.Results, s framework.Severity) framework.Results {
	var out framework.Results
	for _, r := range results {
		if r.Severity == s {
			out = append(out, r)
		}
	}
	return out
}

// unfiled tells whether an object's finding names no file. kustomize (v5.8.2) tells a function the
// file of an item only with buildMetadata: [originAnnotations] in the kustomization; otherwise
// the item carries kustomize's ids and its place in the list, and the finding names the object
// and the field alone. kustomize drops a failing function's results and shows its standard
// error: this is where a person learns how to get the file.
func unfiled(results framework.Results) bool {
	for _, r := range results {
		if r.Severity == framework.Error && r.ResourceRef != nil && (r.File == nil || r.File.Path == "") {
			return true
		}
	}
	return false
}

// configError tells whether the function failed on its configuration alone: krm reports it as
// one error result about the functionConfig, naming no item.
func configError(results framework.Results) bool {
	for _, r := range results {
		if r.Severity == framework.Error && (r.ResourceRef != nil || !strings.Contains(r.Message, "functionConfig")) {
			return false
		}
	}
	return true
}
