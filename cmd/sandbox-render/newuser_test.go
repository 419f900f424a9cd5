package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// exampleTree is a copy of docs/example (the tree a new user starts from) in a directory of its
// own, with the files named in edits rewritten: each edit replaces old with new once.
func exampleTree(t *testing.T, edits map[string][2]string) string {
	t.Helper()
	src := filepath.Join(testenv.RepoRoot(), "docs", "example")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if edit, ok := edits[e.Name()]; ok {
			if !strings.Contains(s, edit[0]) {
				t.Fatalf("docs/example/%s no longer holds %q", e.Name(), edit[0])
			}
			s = strings.Replace(s, edit[0], edit[1], 1)
		}
		writeTree(t, dir, map[string]string{e.Name(): s})
	}
	return dir
}

// TestMessagesOfANewUser (issue 36, item 7): the mistakes a new user made in docs/example are
// reported at the line to fix, in the render's words, by render, validate and build alike.
func TestMessagesOfANewUser(t *testing.T) {
	const (
		// The template's container, with a misspelt field on line 16 of template.yaml.
		pullPolicy = "        image: python:3.12-slim\n"
		typo       = pullPolicy + "        imagePullPolicyy: IfNotPresent\n"
		// render.yaml's last line is 13; the misspelt field is on line 16.
		spec      = "  allowedLabelDomains: [sandbox.users.io]\n"
		dnsMode   = spec + "  policies:\n    networkPolicy:\n      dnsMode: cluster-dns\n"
		templateE = `: document 1 (line 16): error: SandboxTemplate python: spec.podTemplate.spec.containers[0].imagePullPolicyy: Forbidden: unknown field: it is not in the schema (check its spelling and indentation)` + "\n"
	)
	type result struct {
		Code   int
		Stderr string
	}
	cases := map[string]struct {
		reason string
		edits  map[string][2]string
		// args, {dir} standing for the tree.
		args []string
		want result
	}{
		"TemplateFieldRender": {
			reason: "a mistyped template field was reported at the document's first line (3), not at its own (16)",
			edits:  map[string][2]string{"template.yaml": {pullPolicy, typo}},
			args:   []string{"render", "{dir}"},
			want:   result{cli.ExitFailure, "{dir}/template.yaml" + templateE + "sandbox-render: the input cannot be rendered: 1 problem(s)\n"},
		},
		"TemplateFieldValidate": {
			reason: "validate places it as render does",
			edits:  map[string][2]string{"template.yaml": {pullPolicy, typo}},
			args:   []string{"validate", "{dir}"},
			want:   result{cli.ExitFailure, "{dir}/template.yaml" + templateE + "sandbox-render: the input cannot be rendered: 1 problem(s)\n"},
		},
		"TemplateFieldBuild": {
			reason: "build places it as render does (the kustomization's namespace names the object)",
			edits:  map[string][2]string{"template.yaml": {pullPolicy, typo}},
			args:   []string{"build", "{dir}"},
			want: result{cli.ExitFailure, "{dir}/template.yaml" + strings.Replace(templateE, "python", "team-a/python", 1) +
				"sandbox-render: the input has problems; nothing was written\n"},
		},
		"ConfigFieldRender": {
			reason: `said strict decoding error: unknown field "spec.policies.networkPolicy.dnsMode", with no line and in Go's words`,
			edits:  map[string][2]string{"render.yaml": {spec, dnsMode}},
			args:   []string{"render", "{dir}"},
			want:   result{cli.ExitUsage, "sandbox-render: {dir}/render.yaml:16: unknown field `spec.policies.networkPolicy.dnsMode` (did you mean `dns`?)\n"},
		},
		"ConfigFieldValidate": {
			reason: "validate reads the config as render does",
			edits:  map[string][2]string{"render.yaml": {spec, dnsMode}},
			args:   []string{"validate", "{dir}"},
			want:   result{cli.ExitUsage, "sandbox-render: {dir}/render.yaml:16: unknown field `spec.policies.networkPolicy.dnsMode` (did you mean `dns`?)\n"},
		},
		"ConfigFieldGivenAsFlag": {
			reason: "--config is placed in its file too",
			edits:  map[string][2]string{"render.yaml": {spec, dnsMode}},
			args:   []string{"validate", "--config", "{dir}/render.yaml", "{dir}/template.yaml"},
			want:   result{cli.ExitUsage, "sandbox-render: {dir}/render.yaml:16: unknown field `spec.policies.networkPolicy.dnsMode` (did you mean `dns`?)\n"},
		},
		"ConfigFieldBuild": {
			reason: "build reads the config of the tree as render does",
			edits:  map[string][2]string{"render.yaml": {spec, dnsMode}},
			args:   []string{"build", "{dir}"},
			want:   result{cli.ExitUsage, "sandbox-render: building {dir}: {dir}/render.yaml:16: unknown field `spec.policies.networkPolicy.dnsMode` (did you mean `dns`?)\n"},
		},
		"ConfigInALaterDocument": {
			reason: "a config that is a later document of its file is placed at the file's line, not the document's",
			edits: map[string][2]string{"template.yaml": {"  envVarsInjectionPolicy: Allowed\n", "  envVarsInjectionPolicy: Allowed\n---\n" +
				"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  clusterDomian: example.com\n"},
				"render.yaml": {"kind: SandboxRender", "kind: ConfigMap"}},
			args: []string{"validate", "{dir}/template.yaml"},
			want: result{cli.ExitUsage, "sandbox-render: {dir}/template.yaml:27: unknown field `spec.clusterDomian` (did you mean `clusterDomain`?)\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := exampleTree(t, tc.edits)
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "{dir}", dir)
			}
			var stdout, stderr bytes.Buffer
			got := result{run(args, strings.NewReader(""), &stdout, &stderr), stderr.String()}
			want := tc.want
			want.Stderr = strings.ReplaceAll(want.Stderr, "{dir}", dir)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\n%v (-want +got):\n%s", tc.reason, tc.args, diff)
			}
			if stdout.Len() > 0 {
				t.Errorf("%s\nwritten on bad input:\n%s", tc.reason, stdout.String())
			}
		})
	}
}

// TestArgumentMessages: a missing or extra argument says what the command wants, not cobra's
// "accepts 1 arg(s), received 0", and is a usage error.
func TestArgumentMessages(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"BuildNothing": {
			reason: "said accepts 1 arg(s), received 0, without saying which argument",
			args:   []string{"build"},
			want:   "sandbox-render: build needs the kustomization directory to build, e.g. sandbox-render build docs/example\n",
		},
		"BuildTwo": {
			reason: "said accepts 1 arg(s), received 2",
			args:   []string{"build", "a", "b"},
			want:   "sandbox-render: build builds one kustomization directory, not 2 (a b); run it once per directory\n",
		},
		"MigrateNothing": {
			reason: "said requires at least 1 arg(s), only received 0",
			args:   []string{"migrate"},
			want:   "sandbox-render: migrate needs the files or directories to rewrite, e.g. sandbox-render migrate ./manifests (or --check ./manifests to only list them)\n",
		},
		"DiscoverTwo": {
			reason: "said accepts at most 1 arg(s), received 2",
			args:   []string{"discover", "a", "b"},
			want:   "sandbox-render: discover looks at one directory (default: the current one), not 2 (a b)\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
			if diff := cmp.Diff(cli.ExitUsage, code); diff != "" {
				t.Errorf("%s\nexit code (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, stderr.String()); diff != "" {
				t.Errorf("%s\nstandard error (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHelpIsTrueOfItsCommand: the top-level help names every command; a command that writes
// nothing has no flag whose help says it writes (validate --keep-source-versions did).
func TestHelpIsTrueOfItsCommand(t *testing.T) {
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	commands := root.Long[strings.Index(root.Long, "Commands:"):]
	commands = commands[:strings.Index(commands, "\n\n")]
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if !strings.Contains(commands, c.Name()+" (") {
			t.Errorf("the top-level help's list of commands does not say what %s does:\n%s", c.Name(), commands)
		}
	}
	for _, name := range []string{"validate", "discover"} {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			for _, word := range []string{"write", "preview"} {
				if strings.Contains(f.Usage, word) {
					t.Errorf("%s writes nothing, yet --%s says %q: %s", name, f.Name, word, f.Usage)
				}
			}
		})
	}
}
