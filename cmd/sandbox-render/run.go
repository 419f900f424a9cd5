package main

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/internal/version"
	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/krm"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
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

// fnExitCodesHelp is exitCodesHelp for the function, which writes its ResourceList even when it
// fails, as the KRM functions specification asks.
const fnExitCodesHelp = `

Exit codes (the same as every command's):
  0  done: the ResourceList is written, with the rendered objects and any warnings as results
  1  the input has problems (YAML that cannot be read, or objects that do not render): the
     ResourceList is still written, items unchanged, with one error result per problem
  2  the functionConfig is invalid: the ResourceList is still written, items unchanged, with
     the error as a result; or standard input is empty or unreadable: nothing written`

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

type inputFlags struct {
	config             string
	clusterDomain      string
	now                string
	keepSourceVersions bool
}

// add adds the flags to render (writes) or validate, with help that is true of the command: the
// same flags check what render would write, and validate writes nothing.
func (f *inputFlags) add(cmd *cobra.Command, writes bool) {
	cmd.Flags().StringVar(&f.config, "config", "", "a SandboxRender functionConfig file with the render options (see sandbox-render --help)")
	cmd.Flags().StringVar(&f.clusterDomain, "cluster-domain", "", "cluster DNS domain for Service FQDNs (overrides the config; default cluster.local)")
	if writes {
		cmd.Flags().StringVar(&f.now, "now", "", "preview the moment given (RFC 3339, e.g. 2026-06-01T12:00:00Z): Sandboxes past their shutdownTime render as the controller leaves them, with a warning (overrides the config's spec.now)")
		cmd.Flags().BoolVar(&f.keepSourceVersions, "keep-source-versions", false, "write v1alpha1 input objects as they are instead of converted to v1beta1 (for clusters that serve v1alpha1: ours with the controller's conversion webhook, or upstream's)")
		return
	}
	cmd.Flags().StringVar(&f.now, "now", "", "check as of the moment given (RFC 3339, e.g. 2026-06-01T12:00:00Z): Sandboxes past their shutdownTime are checked as the controller leaves them, with a warning (overrides the config's spec.now)")
	cmd.Flags().BoolVar(&f.keepSourceVersions, "keep-source-versions", false, "do not check that v1alpha1 input objects convert to v1beta1, as render --keep-source-versions does not convert them (overrides the config's spec.keepSourceVersions)")
}

// load parses the configuration: --config, else a SandboxRender object among the inputs, else
// the defaults.
func (f *inputFlags) load(in *inputs) (*renderconfig.Config, error) {
	data, from, line := in.config, in.configFrom, in.configLine
	if f.config != "" {
		var err error
		if data, err = os.ReadFile(f.config); err != nil {
			return nil, cli.Usagef("reading --config: %v", err)
		}
		from, line = f.config, 0
		in.configFrom = f.config
	}
	cfg, err := renderconfig.ParseAt(data, line)
	if err != nil {
		var ce *renderconfig.Error
		if errors.As(err, &ce) {
			return nil, cli.Usagef("%s", ce.In(from))
		}
		return nil, cli.Usagef("%s: %v", from, err)
	}
	if f.now != "" {
		t, err := time.Parse(time.RFC3339, f.now)
		if err != nil {
			return nil, cli.Usagef("--now %q: not an RFC 3339 time such as 2026-06-01T12:00:00Z", f.now)
		}
		cfg.Spec.Now = &metav1.Time{Time: t}
	}
	if f.clusterDomain != "" {
		cfg.Spec.ClusterDomain = f.clusterDomain
	}
	if f.keepSourceVersions {
		cfg.Spec.KeepSourceVersions = true
	}
	return cfg, nil
}

// expand reads the inputs, loads the options and renders; a render error is reported on stderr
// and returned as the findings exit.
func (f *inputFlags) expand(args []string, stdin io.Reader, stderr io.Writer) (*renderconfig.Config, *inputs, []*unstructured.Unstructured, error) {
	in, err := readInputs(args, stdin, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(in.objs) == 0 {
		msg := "no objects in the input, so nothing to render or check"
		if in.kustomization != "" {
			msg += fmt.Sprintf("; %s is a kustomization whose resources live elsewhere: sandbox-render build %s builds and renders it", in.kustomization, in.kustomization)
		}
		return nil, nil, nil, cli.Usagef("%s", msg)
	}
	cfg, err := f.load(in)
	if err != nil {
		return nil, nil, nil, err
	}
	x, err := bundle.ExpandEntries(in.objs, cfg.Options(), false)
	if err != nil {
		return nil, nil, nil, in.findings(err, stderr)
	}
	out := x.Objects(in.objs)
	fmt.Fprint(stderr, in.warnings(x.Warnings))
	if *cfg.Spec.KeepSources && !cfg.Spec.KeepSourceVersions {
		if out, err = in.convertSources(out); err != nil {
			return nil, nil, nil, in.findings(err, stderr)
		}
	}
	return cfg, in, out, nil
}

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
		},
	}
	flags.add(cmd, true)
	cmd.Flags().BoolVar(&showExample, "example", false, "print the bundled example input (the Sandbox render renders at a terminal) and exit")
	return cmd
}

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

func buildCommand(stdout, stderr io.Writer) *cobra.Command {
	var outputDir, output string
	var slow bool
	cmd := &cobra.Command{
		Use:   "build DIR",
		Short: "Build a kustomization with the render function in process, as kustomize build --enable-exec would",
		Long: `Builds the kustomization in DIR with sigs.k8s.io/kustomize/api, with the options of
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
tree, is refused, as is an existing --output file sandbox-render did not write.` + exitCodesHelp,
		Example: `  sandbox-render build overlays/production
  sandbox-render build overlays/production --output-dir deploy/production
  sandbox-render build docs/example -o example.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return cli.Usagef("build needs the kustomization directory to build, e.g. sandbox-render build docs/example")
			case len(args) > 1:
				return cli.Usagef("build builds one kustomization directory, not %d (%s); run it once per directory", len(args), strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			if output != "" && outputDir != "" {
				return cli.Usagef("--output and --output-dir exclude each other")
			}
			self, err := os.Executable()
			if err != nil {
				return cli.Usagef("locating this executable: %v", err)
			}
			res, err := kbuild.Build(args[0], self, kbuild.Options{NoFastPath: slow})
			if err != nil {
				var fe *kbuild.FindingsError
				if errors.As(err, &fe) {
					fmt.Fprint(stderr, fe.Report)
					return &cli.ExitError{Code: cli.ExitFailure, Err: errors.New("the input has problems; nothing was written")}
				}
				return cli.Usagef("building %s: %v", args[0], err)
			}
			fmt.Fprint(stderr, krm.Format(res.Warnings))
			if res.FallbackReason != "" {
				fmt.Fprintf(stderr, "sandbox-render: note: the render runs as kustomize runs it, which is slow on large trees: %s\n", res.FallbackReason)
			}
			crs, configs := res.AgentSandboxObjects()
			switch {
			case configs > 0:
				return cli.Usagef("building %s: a SandboxRender config is among the output objects, so it was taken as a resource and nothing was rendered; list its file under transformers:, not resources:", args[0])
			case crs > 0 && !res.Rendered:
				return cli.Usagef("building %s: %d agent-sandbox objects but no SandboxRender transformer in the tree, so nothing was rendered; add a render.yaml (see sandbox-render --help) and list it last under transformers:", args[0], crs)
			}
			switch {
			case outputDir != "":
				written, removed, err := kbuild.WriteDir(outputDir, res)
				if err != nil {
					return cli.Usagef("writing %s: %v", outputDir, err)
				}
				for _, r := range removed {
					fmt.Fprintf(stderr, "removed %s\n", r)
				}
				fmt.Fprintf(stderr, "wrote %d files to %s\n", len(written), outputDir)
				return nil
			case output != "":
				if err := kbuild.WriteFile(output, res); err != nil {
					return cli.Usagef("writing %s: %v", output, err)
				}
				fmt.Fprintf(stderr, "wrote %d objects to %s\n", len(res.Objects), output)
				return nil
			}
			b, err := res.YAML()
			if err != nil {
				return cli.Usagef("%v", err)
			}
			_, err = stdout.Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&outputDir, "output-dir", "", "write one file per object and a kustomization.yaml into this directory instead of standard output")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the YAML stream to this file instead of standard output")
	cmd.Flags().BoolVar(&slow, "no-fast-path", false, "run the SandboxRender function as kustomize runs it even where the one-pass render applies")
	return cmd
}

// inputs are parsed objects and where each came from.
type inputs struct {
	objs   []*unstructured.Unstructured
	files  map[*unstructured.Unstructured]*framework.File
	source map[*unstructured.Unstructured]bool
	// config is a SandboxRender object found among the inputs, from configFrom, where its
	// content starts on configLine (0: not as written there).
	config     []byte
	configFrom string
	configLine int
	// kustomization is a directory argument holding a kustomization file.
	kustomization string
	// text is each input object's document as written, so objects passed through are written
	// out byte for byte.
	text map[*unstructured.Unstructured][]byte
	// lines are where each input object starts, for findings.
	lines map[*unstructured.Unstructured]int
}

// findings reports a render error on stderr and returns the findings exit code.
func (in *inputs) findings(err error, stderr io.Writer) error {
	results := krm.ResultsAt(err, in.objs, in.locator())
	fmt.Fprint(stderr, krm.Format(results))
	return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("the input cannot be rendered: %d problem(s)", len(results))}
}

// warnings are the render's warnings (bundle.Expansion's), one line each, placed and worded as
// findings are, with the severity warning. They do not change the exit code.
func (in *inputs) warnings(ws []bundle.Warning) string {
	return krm.Format(krm.WarningResults(ws, in.objs, in.locator()))
}

// locator places a finding at its field's line in the object's document (yamlread.FieldLine),
// or at the document's first line when the field is not written there (an object of a List,
// or a field only a default sets). Each document is read again only when a finding is on it,
// and once.
func (in *inputs) locator() krm.Locate {
	nodes := map[*unstructured.Unstructured]*yamlread.Node{}
	return func(u *unstructured.Unstructured, field string) (*framework.File, int) {
		start := in.lines[u]
		n, seen := nodes[u]
		if !seen {
			if docs, err := yamlread.ReadNodes(in.text[u]); in.text[u] != nil && err == nil && len(docs) == 1 {
				n = &docs[0]
			}
			nodes[u] = n
		}
		if n != nil {
			if l := yamlread.FieldLine(n.Node, field); l > 0 {
				return in.files[u], l - n.Line + start
			}
		}
		return in.files[u], start
	}
}

// readInputs reads every named source. With none, standard input, or the bundled example when
// standard input is a terminal. SandboxRender objects become the configuration; Kustomizations
// are not inputs.
func readInputs(args []string, stdin io.Reader, stderr io.Writer) (*inputs, error) {
	in := &inputs{files: map[*unstructured.Unstructured]*framework.File{}, source: map[*unstructured.Unstructured]bool{},
		text: map[*unstructured.Unstructured][]byte{}, lines: map[*unstructured.Unstructured]int{}}
	add := func(name string, data []byte) error {
		docs, err := manifest.Read(name, data)
		if err != nil {
			// YAML that cannot be read (syntax, duplicate keys, aliases, encoding) is a problem
			// of the input, as the function reports it, not a usage error.
			return &cli.ExitError{Code: cli.ExitFailure, Err: err}
		}
		for _, d := range docs {
			o := d.Object
			switch {
			case o.GetKind() == renderconfig.Kind && o.GetAPIVersion() == renderconfig.APIVersion:
				if in.config != nil {
					return cli.Usagef("%s: a second SandboxRender config (the first is in %s); keep one per tree", name, in.configFrom)
				}
				// As written, so that its problems are placed at their lines in the file; an item
				// of a List has no text of its own.
				b, line := d.Text, d.Line
				if b == nil {
					var err error
					if b, err = yaml.Marshal(o.Object); err != nil {
						return cli.Usagef("%s: %v", name, err)
					}
					line = 0
				}
				in.config, in.configFrom, in.configLine = b, name, line
				continue
			case o.GroupVersionKind().Group == "kustomize.config.k8s.io":
				continue
			}
			in.files[o] = &framework.File{Path: name, Index: d.Index - 1}
			in.source[o] = true
			in.lines[o] = d.Line
			if d.Text != nil {
				in.text[o] = d.Text
			}
			in.objs = append(in.objs, o)
		}
		return nil
	}
	if len(args) == 0 {
		if terminal(stdin) {
			fmt.Fprintln(stderr, "sandbox-render: no input given and standard input is a terminal; rendering the bundled example (see render --help)")
			return in, add("example.yaml", example)
		}
		args = []string{"-"}
	}
	for _, a := range args {
		for _, n := range kbuild.KustomizationFileNames {
			if _, err := os.Stat(filepath.Join(a, n)); err == nil && a != "-" {
				in.kustomization = a
			}
		}
		files, err := expand(a)
		if err != nil && in.kustomization == a && strings.Contains(err.Error(), "no *.yaml") {
			err = nil
		}
		if err != nil {
			return nil, cli.Usagef("%v", err)
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(stdin)
				if err == nil && len(bytes.TrimSpace(data)) == 0 {
					err = errors.New("it is empty; pass files or directories, or pipe YAML into it")
				}
				f = "standard input"
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, cli.Usagef("reading %s: %v", f, err)
			}
			if err := add(f, data); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}

// expand turns an argument into the files it names.
func expand(arg string) ([]string, error) {
	if arg == "-" {
		return []string{"-"}, nil
	}
	return filesBelow(arg, "*.yaml, *.yml or *.json", func(d fs.DirEntry) bool {
		switch strings.ToLower(filepath.Ext(d.Name())) {
		case ".yaml", ".yml", ".json":
			return !d.IsDir() && !isKustomization(d.Name())
		}
		return false
	})
}

// filesBelow is the file an argument names, or the files below a directory that keep accepts,
// in name order; a directory with none is an error saying what was looked for.
func filesBelow(arg, what string, keep func(fs.DirEntry) bool) ([]string, error) {
	info, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{arg}, nil
	}
	var files []string
	err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if keep(d) {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s: no %s files", arg, what)
	}
	return files, err
}

// isKustomization tells a kustomization file by its name, as kustomize finds it.
func isKustomization(name string) bool {
	return slices.Contains(kbuild.KustomizationFileNames, name)
}

// terminal reports whether r is a terminal (a person typing), not a pipe, a file or /dev/null
// (a character device too, but no terminal). A variable so tests can play the person.
var terminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(newRoot(stdin, stdout, stderr), args, stderr)
}
