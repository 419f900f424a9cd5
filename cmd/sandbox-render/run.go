package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

//go:embed example.yaml
var example []byte

// Exit codes, documented in --help.
const (
	exitOK       = 0
	exitFindings = 1
	exitUsage    = 2
)

const usage = `Usage: sandbox-render [flags] [FILE|DIR|-]...

Renders agent-sandbox custom resources into the objects upstream's controllers create: for every
Sandbox its Pod (unless suspended), the PVCs of its volumeClaimTemplates and, with service: true,
its headless Service. Input is YAML or JSON: files, directories (every *.yaml, *.yml and *.json
below them, in name order) or - for standard input. Output, on standard output, is the input
followed by the rendered children, as one YAML stream sorted by kind, namespace and name. Objects
of other kinds pass through unchanged.

With no arguments, renders a bundled example Sandbox (print it with --example).

Input is checked as the API server would check it (unknown fields, schema, defaults) plus what
would make a child impossible to create; every problem of every object is reported, and nothing
is written unless the whole input is valid.

Exit codes: 0 rendered; 1 the input has problems (reported on standard error); 2 usage or I/O error.

Flags:
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("sandbox-render", flag.ContinueOnError)
	fl.SetOutput(stderr)
	clusterDomain := fl.String("cluster-domain", render.DefaultClusterDomain, "cluster DNS domain, used in Service FQDNs")
	showExample := fl.Bool("example", false, "print the bundled example input and exit")
	fl.Usage = func() {
		fmt.Fprint(stderr, usage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *showExample {
		_, _ = stdout.Write(example)
		return exitOK
	}

	objs, err := readInputs(fl.Args(), stdin, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-render: %v\n", err)
		return exitUsage
	}
	out, err := bundle.Expand(objs, render.Options{ClusterDomain: *clusterDomain})
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-render: the input cannot be rendered:\n%v\n", err)
		return exitFindings
	}
	b, err := manifest.Encode(out)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-render: %v\n", err)
		return exitUsage
	}
	if _, err := stdout.Write(b); err != nil {
		fmt.Fprintf(stderr, "sandbox-render: writing output: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// readInputs reads every named source; with none, the bundled example.
func readInputs(args []string, stdin io.Reader, stderr io.Writer) ([]*unstructured.Unstructured, error) {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "sandbox-render: no input given; rendering the bundled example (see --help)")
		return manifest.Parse("example.yaml", example)
	}
	var objs []*unstructured.Unstructured
	for _, a := range args {
		files, err := expand(a)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			o, err := manifest.Parse(f, data)
			if err != nil {
				return nil, err
			}
			objs = append(objs, o...)
		}
	}
	return objs, nil
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
