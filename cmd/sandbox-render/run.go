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
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"

	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/krm"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
)

//go:embed example.yaml
var example []byte

// Exit codes, documented in --help.
const (
	exitOK       = 0
	exitFindings = 1
	exitUsage    = 2
)

// exitError carries the exit code of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func usageErr(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

const exitCodesHelp = `

Exit codes:
  0  done, no problems
  1  the input has problems (each reported with its object, field and file)
  2  usage, configuration or I/O error`

const rootLong = `sandbox-render renders agent-sandbox custom resources (Sandbox, SandboxTemplate, SandboxClaim and
SandboxWarmPool, v1beta1 or v1alpha1) into the objects upstream's controllers would create: for every
template its NetworkPolicy, for every pool its member Sandboxes, for every claim its Sandbox, and for
every Sandbox its Pod, PVCs and headless Service. So they can be reviewed in Git and applied by
GitOps tools.

Run with no command and a ResourceList on standard input (as kustomize runs exec functions), or with
the fn command, it is a KRM function configured by a SandboxRender functionConfig:

  apiVersion: render.sandbox-gitops.dev/v1alpha1
  kind: SandboxRender
  metadata:
    name: render
    annotations:
      config.kubernetes.io/function: |
        exec:
          path: ./sandbox-render
  spec:
    mode: expand            # or validate: results only, items unchanged
    keepSources: true       # false emits only what the custom resources render to
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
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if isTerminal(stdin) {
				return usageErr("no command given and standard input is a terminal; see sandbox-render --help")
			}
			data, err := io.ReadAll(stdin)
			if err != nil {
				return usageErr("reading standard input: %v", err)
			}
			if !bytes.Contains(data, []byte("ResourceList")) {
				return usageErr("no command given and standard input is not a KRM ResourceList; see sandbox-render --help")
			}
			return runFunction(data, stdout, stderr)
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(fnCommand(stdin, stdout, stderr), renderCommand(stdin, stdout, stderr),
		validateCommand(stdin, stdout, stderr), buildCommand(stdout, stderr))
	return root
}

func fnCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "fn",
		Short: "Run as a KRM function: a ResourceList on standard input, the result on standard output",
		Long: `Runs as a KRM function (the same as running with no command and a ResourceList on standard
input). Items that are not agent-sandbox objects pass through unchanged. Problems are written as
results with severity, resourceRef, field and file (the file comes from the items' path annotations,
or from kustomize's origin annotations with buildMetadata: [originAnnotations]); on an error the
items are written unchanged and the exit code is 1.` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return usageErr("reading standard input: %v", err)
			}
			return runFunction(data, stdout, stderr)
		},
	}
}

func runFunction(data []byte, stdout, stderr io.Writer) error {
	err := krm.Run(bytes.NewReader(data), stdout)
	if err == nil {
		return nil
	}
	var results framework.Results
	if errors.As(err, &results) {
		fmt.Fprint(stderr, krm.Format(results))
		if results.ExitCode() == 0 {
			return nil
		}
		return &exitError{exitFindings, errors.New("the input has problems")}
	}
	return usageErr("%v", err)
}

type inputFlags struct {
	config        string
	clusterDomain string
}

func (f *inputFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.config, "config", "", "a SandboxRender functionConfig file with the render options (see sandbox-render --help)")
	cmd.Flags().StringVar(&f.clusterDomain, "cluster-domain", "", "cluster DNS domain for Service FQDNs (overrides the config; default cluster.local)")
}

func (f *inputFlags) load() (*krm.SandboxRender, error) {
	var data []byte
	if f.config != "" {
		var err error
		if data, err = os.ReadFile(f.config); err != nil {
			return nil, usageErr("reading --config: %v", err)
		}
	}
	cfg, err := krm.ParseConfig(data)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if f.clusterDomain != "" {
		cfg.Spec.ClusterDomain = f.clusterDomain
	}
	return cfg, nil
}

// expand loads the options, reads the inputs and renders them; a render error is reported on
// stderr and returned as the findings exit.
func (f *inputFlags) expand(args []string, stdin io.Reader, stderr io.Writer) (*krm.SandboxRender, *inputs, []*unstructured.Unstructured, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, nil, nil, err
	}
	in, err := readInputs(args, stdin, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := bundle.Expand(in.objs, cfg.Options())
	if err != nil {
		return nil, nil, nil, in.findings(err, stderr)
	}
	return cfg, in, out, nil
}

func renderCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var flags inputFlags
	var showExample bool
	cmd := &cobra.Command{
		Use:   "render [FILE|DIR|-]...",
		Short: "Render YAML files, directories or standard input; with no argument, the bundled example",
		Long: `Reads YAML or JSON from files, directories (every *.yaml, *.yml and *.json below them, in name
order) or - (standard input), and writes the input followed by everything it renders, as one YAML
stream sorted by kind, namespace and name. Objects of other kinds pass through unchanged.

With no argument, renders a bundled example Sandbox (print it with --example).

Input is checked as the API server would check it (unknown fields, schema, defaults) and for what
would make a rendered object impossible to create; every problem of every object is reported, and
nothing is written unless the whole input renders.` + exitCodesHelp,
		RunE: func(_ *cobra.Command, args []string) error {
			if showExample {
				_, err := stdout.Write(example)
				return err
			}
			cfg, in, out, err := flags.expand(args, stdin, stderr)
			if err != nil {
				return err
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
			b, err := manifest.EncodeKeeping(out, in.text)
			if err != nil {
				return usageErr("%v", err)
			}
			_, err = stdout.Write(b)
			return err
		},
	}
	flags.add(cmd)
	cmd.Flags().BoolVar(&showExample, "example", false, "print the bundled example input and exit")
	return cmd
}

func validateCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var flags inputFlags
	cmd := &cobra.Command{
		Use:   "validate [FILE|DIR|-]...",
		Short: "Check that YAML files, directories or standard input render, without writing anything",
		Long: `Reads input as render does and reports every problem of every agent-sandbox object, with the
file, object and field; writes nothing on standard output.` + exitCodesHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			_, in, _, err := flags.expand(args, stdin, stderr)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "%d objects checked: no problems\n", len(in.objs))
			return nil
		},
	}
	flags.add(cmd)
	return cmd
}

func buildCommand(stdout, stderr io.Writer) *cobra.Command {
	var outputDir string
	cmd := &cobra.Command{
		Use:   "build DIR",
		Short: "Build a kustomization with the render function in process, as kustomize build --enable-exec would",
		Long: `Builds the kustomization in DIR with sigs.k8s.io/kustomize/api, with the options of
kustomize build --enable-alpha-plugins --enable-exec, so no kustomize binary is needed and the bytes
are the same. SandboxRender function configs in the tree run as this executable, whatever path their
exec annotation names. Other exec functions in the tree run as kustomize would run them.

With --output-dir, writes one file per object (named as kustomize build -o names them) and a
kustomization.yaml listing them, for the rendered-manifests pattern (Flux, or Argo CD without
plugins). YAML files already in that directory are removed first, so deleted objects do not linger.` + exitCodesHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return usageErr("locating this executable: %v", err)
			}
			m, err := kbuild.Build(args[0], self)
			if err != nil {
				return &exitError{exitFindings, err}
			}
			if outputDir == "" {
				b, err := m.AsYaml()
				if err != nil {
					return usageErr("%v", err)
				}
				_, err = stdout.Write(b)
				return err
			}
			written, removed, err := kbuild.WriteDir(outputDir, m)
			if err != nil {
				return usageErr("writing %s: %v", outputDir, err)
			}
			for _, r := range removed {
				fmt.Fprintf(stderr, "removed %s\n", r)
			}
			fmt.Fprintf(stderr, "wrote %d files to %s\n", len(written), outputDir)
			return nil
		},
	}
	cmd.Flags().StringVarP(&outputDir, "output-dir", "o", "", "write one file per object into this directory instead of standard output")
	return cmd
}

// inputs are parsed objects and where each came from.
type inputs struct {
	objs   []*unstructured.Unstructured
	files  map[*unstructured.Unstructured]*framework.File
	source map[*unstructured.Unstructured]bool
	// text is each input object's document as written, so objects passed through are written
	// out byte for byte.
	text map[*unstructured.Unstructured][]byte
	// lines are where each input object starts, for findings.
	lines map[*unstructured.Unstructured]int
}

// findings reports a render error on stderr and returns the findings exit code.
func (in *inputs) findings(err error, stderr io.Writer) error {
	results := krm.ResultsAt(err, in.objs, func(u *unstructured.Unstructured) (*framework.File, int) { return in.files[u], in.lines[u] })
	fmt.Fprint(stderr, krm.Format(results))
	return &exitError{exitFindings, fmt.Errorf("the input cannot be rendered: %d problem(s)", len(results))}
}

// readInputs reads every named source; with none, the bundled example.
func readInputs(args []string, stdin io.Reader, stderr io.Writer) (*inputs, error) {
	in := &inputs{files: map[*unstructured.Unstructured]*framework.File{}, source: map[*unstructured.Unstructured]bool{},
		text: map[*unstructured.Unstructured][]byte{}, lines: map[*unstructured.Unstructured]int{}}
	add := func(name string, data []byte) error {
		docs, err := manifest.Read(name, data)
		if err != nil {
			return usageErr("%v", err)
		}
		for _, d := range docs {
			in.files[d.Object] = &framework.File{Path: name, Index: d.Index - 1}
			in.source[d.Object] = true
			in.lines[d.Object] = d.Line
			if d.Text != nil {
				in.text[d.Object] = d.Text
			}
			in.objs = append(in.objs, d.Object)
		}
		return nil
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "sandbox-render: no input given; rendering the bundled example (see --help)")
		return in, add("example.yaml", example)
	}
	for _, a := range args {
		files, err := expand(a)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, usageErr("reading %s: %v", f, err)
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
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	sort.Strings(files)
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s: no *.yaml, *.yml or *.json files", arg)
	}
	return files, err
}

// isTerminal reports whether r is a character device (a person at a terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintf(stderr, "sandbox-render: %v\n", ee.err)
		return ee.code
	}
	// cobra's own errors: unknown commands and flags, wrong argument counts.
	fmt.Fprintf(stderr, "sandbox-render: %v\n", err)
	return exitUsage
}
