package main

import (
	"bytes"
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
	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/krm"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

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
	if len(args) == 0 {
		if terminal(stdin) {
			fmt.Fprintln(stderr, "sandbox-render: no input given and standard input is a terminal; rendering the bundled example (see render --help)")
			return in, in.add("example.yaml", example)
		}
		args = []string{"-"}
	}
	for _, a := range args {
		if err := in.readArg(a, stdin); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// readArg reads the files an argument names (standard input for -), noting a kustomization
// directory, which may hold no *.yaml of its own.
func (in *inputs) readArg(a string, stdin io.Reader) error {
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
		return cli.Usagef("%v", err)
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
			return cli.Usagef("reading %s: %v", f, err)
		}
		if err := in.add(f, data); err != nil {
			return err
		}
	}
	return nil
}

// add reads one file's objects into the inputs: a SandboxRender config aside, Kustomization
// files dropped, every other object with its file, document, line and text.
func (in *inputs) add(name string, data []byte) error {
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
			if err := in.setConfig(name, d); err != nil {
				return err
			}
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

// setConfig takes the SandboxRender config document d of file name; a tree has one.
func (in *inputs) setConfig(name string, d manifest.Document) error {
	if in.config != nil {
		return cli.Usagef("%s: a second SandboxRender config (the first is in %s); keep one per tree", name, in.configFrom)
	}
	// As written, so that its problems are placed at their lines in the file; an item
	// of a List has no text of its own.
	b, line := d.Text, d.Line
	if b == nil {
		var err error
		if b, err = yaml.Marshal(d.Object.Object); err != nil {
			return cli.Usagef("%s: %v", name, err)
		}
		line = 0
	}
	in.config, in.configFrom, in.configLine = b, name, line
	return nil
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
