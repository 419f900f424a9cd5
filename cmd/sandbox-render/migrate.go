package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/migrate"
)

const migrateLong = `Rewrites the v1alpha1 agent-sandbox objects (Sandbox, SandboxTemplate, SandboxClaim,
SandboxWarmPool) of YAML files in place as v1beta1, the version this project's CRDs store
(v1alpha1 is served only through the controller's conversion webhook), with upstream's
conversion rules:

  Sandbox          spec.replicas 0 / 1 becomes spec.operatingMode Suspended / Running
  SandboxTemplate  the api.agents.x-k8s.io/v1beta1-volume-claim-templates-policy annotation becomes
                   spec.volumeClaimTemplatesPolicy
  SandboxClaim     spec.sandboxTemplateRef and spec.warmpool become spec.warmPoolRef: the pool it
                   names, or shadow-pool-<template> for "none" and "default" (as upstream)
  SandboxWarmPool  only the apiVersion

Only the edited tokens change: comments, key order, quoting, anchors and every other document of
a file stay byte for byte (a document whose edit has no such form, say a key removed from a
one-line flow mapping, is re-encoded with its comments). Directories are searched for *.yaml and
*.yml files. Running it again changes nothing.

Nothing is written unless every file parses and every object converts without losing
information: a claim whose template differs from the template of the pool it names (among the
files given) is an error naming the field; fields behind YAML aliases or merge keys are refused.
Objects exported with a v1alpha1 client carry the conversion webhook's
conversion.sandbox-gitops.dev/v1beta1 annotation: the status fields and pool replicas it keeps are
put back where v1beta1 holds them; any other field it keeps (a claim's volumeClaimTemplates) is
an error: export such objects as v1beta1. Warnings (a "none" warm pool policy, a pool not among
the files) are printed and do not stop the migration.

Writing is all or nothing: every new content is first written to a temporary file beside its
file (with the file's permissions) and synced, and only then are they renamed into place. If any
file cannot be written, the temporary files are removed and no file is changed; the message
names the file and the cause (exit code 2).

With --check nothing is written: the files that would change are listed on standard output and
the exit code is 1 if there are any (for CI).` + exitCodesHelp

const migrateExample = `  # In CI: fail while any manifest is still v1alpha1
  sandbox-render migrate --check ./manifests

  # Rewrite them in place, then review the diff
  sandbox-render migrate ./manifests && git diff`

func migrateCommand(stdout, stderr io.Writer) *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:     "migrate FILE|DIR...",
		Short:   "Rewrite v1alpha1 agent-sandbox objects in YAML files as v1beta1, in place",
		Long:    migrateLong,
		Example: migrateExample,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cli.Usagef("migrate needs the files or directories to rewrite, e.g. sandbox-render migrate ./manifests (or --check ./manifests to only list them)")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return runMigrate(args, check, stdout, stderr)
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "change nothing; list the files that would change and exit 1 if there are any")
	return cmd
}

// runMigrate rewrites the v1alpha1 objects of the files the arguments name as v1beta1, in place,
// all files or none; with check it only lists the files that would change.
func runMigrate(args []string, check bool, stdout, stderr io.Writer) error {
	files, sources, err := readMigrateFiles(args, stderr)
	if err != nil {
		return err
	}
	// Claims are checked against the pools of every file given, wherever they are.
	opts := migrate.FilesOptions(files)

	type change struct {
		replacement
		objects int
	}
	var changes []change
	failed := false
	for i, f := range files {
		out, res, err := f.Migrate(opts)
		if err != nil {
			return cli.Usagef("%v", err)
		}
		for _, m := range res.Messages(f.Name) {
			fmt.Fprintln(stderr, m)
		}
		if res.Failed() {
			failed = true
			continue
		}
		if res.Changed {
			n := 0
			for _, o := range res.Objects {
				if o.Changed {
					n++
				}
			}
			changes = append(changes, change{replacement{name: f.Name, old: sources[i], new: out}, n})
		}
	}
	if failed {
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("some objects cannot be converted without losing information; no file was changed")}
	}
	if check {
		for _, c := range changes {
			fmt.Fprintln(stdout, c.name)
		}
		if len(changes) > 0 {
			return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%d of %d file(s) hold v1alpha1 objects; run sandbox-render migrate to rewrite them", len(changes), len(files))}
		}
		fmt.Fprintf(stderr, "%d file(s) checked: nothing to migrate\n", len(files))
		return nil
	}
	reps := make([]replacement, len(changes))
	for i, c := range changes {
		reps[i] = c.replacement
	}
	if err := replaceAll(reps, os.Rename); err != nil {
		return cli.Usagef("%v", err)
	}
	for _, c := range changes {
		fmt.Fprintf(stdout, "migrated %s (%d objects)\n", c.name, c.objects)
	}
	if len(changes) == 0 {
		fmt.Fprintf(stderr, "%d file(s) checked: nothing to migrate\n", len(files))
	}
	return nil
}

// readMigrateFiles parses the files the arguments name, keeping each file's text as read to put
// back should a rename fail. A file that is not valid YAML fails the whole run: nothing is changed.
func readMigrateFiles(args []string, stderr io.Writer) ([]*migrate.File, [][]byte, error) {
	var names []string
	for _, a := range args {
		files, err := yamlFiles(a)
		if err != nil {
			return nil, nil, cli.Usagef("%v", err)
		}
		names = append(names, files...)
	}
	files := make([]*migrate.File, 0, len(names))
	// sources are the files' contents as read, kept to put back should a rename fail.
	sources := make([][]byte, 0, len(names))
	var problems []string
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, nil, cli.Usagef("reading %s: %v", name, err)
		}
		f, err := migrate.Parse(name, data)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		files = append(files, f)
		sources = append(sources, data)
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, strings.Join(problems, "\n"))
		return nil, nil, &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%d file(s) are not valid YAML; no file was changed", len(problems))}
	}
	return files, sources, nil
}

// yamlFiles is the file an argument names, or the *.yaml and *.yml files (or links to them)
// below a directory, in name order.
func yamlFiles(arg string) ([]string, error) {
	if arg == "-" {
		return nil, fmt.Errorf("migrate rewrites files in place; standard input is not a file")
	}
	return filesBelow(arg, "*.yaml or *.yml", func(d fs.DirEntry) bool {
		switch strings.ToLower(filepath.Ext(d.Name())) {
		case ".yaml", ".yml":
			return d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0
		}
		return false
	})
}
