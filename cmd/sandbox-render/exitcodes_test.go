package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
)

// The classes of bad input the exit-code contract is pinned for, each as one file.
var (
	syntaxDoc    = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: [\n"
	duplicateDoc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  name: d\n"
	aliasBombDoc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nx:\n" +
		"  a: &a [x, x, x, x, x, x, x, x, x, x]\n  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
		"  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
		"  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
	tooDeepDoc   = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nx: " + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "\n"
	findingDoc   = "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: x\n  namespace: ns\nspec: {}\n"
	badConfigDoc = strings.Replace(restrictedConfig, "restricted: true", "restrictd: true", 1)
	// A v1alpha1 claim whose template is not its pool's: migrate's finding (converting loses it).
	lossyClaimDoc = "apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxWarmPool\nmetadata:\n  name: pool\n  namespace: ns\nspec:\n  replicas: 1\n  sandboxTemplateRef:\n    name: python\n" +
		"---\napiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxClaim\nmetadata:\n  name: c\n  namespace: ns\nspec:\n  sandboxTemplateRef:\n    name: gpu\n  warmpool: pool\n"
	duplicateKustomization = "resources:\n- cm.yaml\nresources:\n- other.yaml\n"
	// Issue 37: what render took and build refused, or the other way round.
	configMapDoc     = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
	utf16AfterSepDoc = configMapDoc + "---\n" + utf16(sandboxYAML)
	nulDoc           = configMapDoc + "data: {k: \"a\x00b\"}\n"
	afterDotsDoc     = configMapDoc + "...\n" + sandboxYAML
	emptyResourceDoc = strings.Replace(restrictedConfig, "  policies:\n    packs:\n      restricted: true\n", "  resources: [{}]\n", 1)
	badRuntimeDoc    = strings.Replace(restrictedConfig, "restricted: true", "runtimeClass: {allowed: [\"Bad Name\"]}", 1)
)

// configFiles are the trees of render, validate and build for a SandboxRender config, and the
// function's ResourceList with it as functionConfig.
func configFiles(config string) (map[string]map[string]string, string) {
	return map[string]map[string]string{
			"render": {"render.yaml": config, "sandbox.yaml": sandboxYAML}, "validate": {"render.yaml": config, "sandbox.yaml": sandboxYAML},
			"build": {"kustomization.yaml": kustomization, "render.yaml": config, "sandbox.yaml": sandboxYAML},
		}, strings.TrimSuffix(asResourceList(sandboxYAML), "\n") + "\nfunctionConfig:\n  " +
			strings.ReplaceAll(strings.TrimSuffix(config, "\n"), "\n", "\n  ") + "\n"
}

// utf16 is s, ASCII, as UTF-16 little-endian with its byte-order mark.
func utf16(s string) string {
	b := []byte{0xff, 0xfe}
	for i := 0; i < len(s); i++ {
		b = append(b, s[i], 0)
	}
	return string(b)
}

// asResourceList puts one document in a ResourceList as its item.
func asResourceList(doc string) string {
	return "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- " +
		strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
}

// TestExitCodeContract pins the exit code of every class of bad input in every mode, as --help
// gives them: 0 done, 1 problems in the input, 2 usage, configuration or I/O. YAML that cannot be
// read exited 2 in render and validate and 1 in the function, and build accepted a duplicate key
// in a kustomization. On failure nothing is written, except by the function, which writes its
// ResourceList with the results on 1 and on 2 for an invalid functionConfig (the KRM functions
// specification), but not on a usage error. A mode a class cannot reach (the function has no
// files or kustomization, migrate no functionConfig) has no entry.
func TestExitCodeContract(t *testing.T) {
	const (
		render, validate, build, fn, migrate = "render", "validate", "build", "fn", "migrate"
	)
	type class struct {
		// doc is the bad file: render, validate and migrate read it, build lists it as a
		// resource of a kustomization with the render transformer, the function gets it as an
		// item (utf16: the whole ResourceList encoded so).
		doc   string
		utf16 bool
		// files is a tree instead of doc; args are the arguments after the mode, where {dir}
		// stands for the tree.
		files map[string]map[string]string
		args  map[string][]string
		// stdin is the function's input instead of doc as an item.
		stdin string
		want  map[string]int
	}
	all := func(code int) map[string]int {
		return map[string]int{render: code, validate: code, build: code, fn: code, migrate: code}
	}
	classes := map[string]class{
		"syntax error":     {doc: syntaxDoc, want: all(cli.ExitFailure)},
		"duplicate key":    {doc: duplicateDoc, want: all(cli.ExitFailure)},
		"alias bomb":       {doc: aliasBombDoc, want: all(cli.ExitFailure)},
		"too-deep nesting": {doc: tooDeepDoc, want: all(cli.ExitFailure)},
		"bad encoding":     {doc: sandboxYAML, utf16: true, want: all(cli.ExitFailure)},
		"render finding":   {doc: findingDoc, want: map[string]int{render: cli.ExitFailure, validate: cli.ExitFailure, build: cli.ExitFailure, fn: cli.ExitFailure}},
		"migrate finding":  {doc: lossyClaimDoc, want: map[string]int{migrate: cli.ExitFailure}},
		"bad flag":         {args: map[string][]string{render: {"--nope"}, validate: {"--nope"}, build: {"--nope"}, fn: {"--nope"}, migrate: {"--nope"}}, want: all(cli.ExitUsage)},
		"missing file":     {args: map[string][]string{render: {"{dir}/absent.yaml"}, validate: {"{dir}/absent.yaml"}, build: {"{dir}/absent"}, migrate: {"{dir}/absent.yaml"}}, want: map[string]int{render: cli.ExitUsage, validate: cli.ExitUsage, build: cli.ExitUsage, migrate: cli.ExitUsage}},
		"invalid functionConfig": {
			files: map[string]map[string]string{
				render: {"render.yaml": badConfigDoc, "sandbox.yaml": sandboxYAML}, validate: {"render.yaml": badConfigDoc, "sandbox.yaml": sandboxYAML},
				build: {"kustomization.yaml": kustomization, "render.yaml": badConfigDoc, "sandbox.yaml": sandboxYAML},
			},
			stdin: "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n" +
				"  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  spec:\n    mdoe: expand\n",
			want: map[string]int{render: cli.ExitUsage, validate: cli.ExitUsage, build: cli.ExitUsage, fn: cli.ExitUsage},
		},
		// The function reads its own input: a ResourceList followed by the same trouble.
		"UTF-16 after a separator": {doc: utf16AfterSepDoc, stdin: asResourceList(configMapDoc) + "---\n" + utf16(sandboxYAML), want: all(cli.ExitFailure)},
		"NUL byte":                 {doc: nulDoc, want: all(cli.ExitFailure)},
		"document after ...":       {doc: afterDotsDoc, stdin: asResourceList(configMapDoc) + "...\n" + sandboxYAML, want: all(cli.ExitFailure)},
		"spec.resources: [{}]": {
			files: func() map[string]map[string]string { f, _ := configFiles(emptyResourceDoc); return f }(),
			stdin: func() string { _, in := configFiles(emptyResourceDoc); return in }(),
			want:  map[string]int{render: cli.ExitUsage, validate: cli.ExitUsage, build: cli.ExitUsage, fn: cli.ExitUsage},
		},
		"runtimeClass not a name": {
			files: func() map[string]map[string]string { f, _ := configFiles(badRuntimeDoc); return f }(),
			stdin: func() string { _, in := configFiles(badRuntimeDoc); return in }(),
			want:  map[string]int{render: cli.ExitUsage, validate: cli.ExitUsage, build: cli.ExitUsage, fn: cli.ExitUsage},
		},
		"duplicate key in kustomization.yaml": {
			files: map[string]map[string]string{
				render: {"kustomization.yaml": duplicateKustomization}, validate: {"kustomization.yaml": duplicateKustomization},
				build:   {"kustomization.yaml": duplicateKustomization, "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"},
				migrate: {"kustomization.yaml": duplicateKustomization},
			},
			// render and validate read a kustomization only when it is named; a directory's is
			// not an input (render --help).
			args: map[string][]string{render: {"{dir}/kustomization.yaml"}, validate: {"{dir}/kustomization.yaml"}, build: {"{dir}"}, migrate: {"{dir}"}},
			want: map[string]int{render: cli.ExitFailure, validate: cli.ExitFailure, build: cli.ExitFailure, migrate: cli.ExitFailure},
		},
	}
	got, want := map[string]map[string]int{}, map[string]map[string]int{}
	for name, c := range classes {
		got[name], want[name] = map[string]int{}, c.want
		for mode := range c.want {
			dir := t.TempDir()
			files := c.files[mode]
			if files == nil && c.doc != "" {
				doc := c.doc
				if c.utf16 {
					doc = utf16(doc)
				}
				files = map[string]string{"in.yaml": doc}
				if mode == build {
					files["kustomization.yaml"] = "resources:\n- in.yaml\ntransformers:\n- render.yaml\n"
					files["render.yaml"] = strings.Replace(restrictedConfig, "restricted: true", "restricted: false", 1)
				}
			}
			writeTree(t, dir, files)
			args := []string{mode}
			switch {
			case c.args[mode] != nil:
				for _, a := range c.args[mode] {
					args = append(args, strings.ReplaceAll(a, "{dir}", dir))
				}
			case mode == fn: // standard input only
			case mode == build || mode == migrate || files["in.yaml"] == "":
				args = append(args, dir)
			default:
				args = append(args, filepath.Join(dir, "in.yaml"))
			}
			stdin := c.stdin
			if mode == fn && stdin == "" && c.doc != "" {
				stdin = asResourceList(c.doc)
				if c.utf16 {
					stdin = utf16(stdin)
				}
			}
			var stdout, stderr bytes.Buffer
			code := run(args, strings.NewReader(stdin), &stdout, &stderr)
			got[name][mode] = code
			wrote := stdout.Len() > 0
			// The function writes its list on 1, and on 2 when it ran (an invalid
			// functionConfig), not on a usage error.
			wantWritten := mode == fn && code != cli.ExitOK && name != "bad flag"
			if code != cli.ExitOK && wrote != wantWritten {
				t.Errorf("%s, %s: exit %d, wrote %d bytes on standard output, want written %v:\n%s", name, mode, code, stdout.Len(), wantWritten, stdout.String())
			}
			if wantWritten && !strings.Contains(stdout.String(), "kind: ResourceList") || wantWritten && !strings.Contains(stdout.String(), "results:") {
				t.Errorf("%s, %s: the function did not write the ResourceList with results:\n%s", name, mode, stdout.String())
			}
			if code != cli.ExitOK && stderr.Len() == 0 {
				t.Errorf("%s, %s: exit %d and nothing on standard error", name, mode, code)
			}
			if strings.Contains(stderr.String(), "please report") {
				t.Errorf("%s, %s: an internal error for input a user can type:\n%s", name, mode, stderr.String())
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exit codes by class and mode (-want +got):\n%s", diff)
	}
}

// TestFunctionHelpSaysWhatIsWritten: fn --help said "nothing written" for exit code 2, on which
// the function writes its ResourceList with the results.
func TestFunctionHelpSaysWhatIsWritten(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"fn", "--help"}, strings.NewReader(""), &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	help := stdout.String()
	at := strings.Index(help, "Exit codes")
	if at < 0 {
		t.Fatalf("no exit codes in:\n%s", help)
	}
	codes := help[at:]
	one, two := strings.Index(codes, "\n  1 "), strings.Index(codes, "\n  2 ")
	if one < 0 || two < one {
		t.Fatalf("exit codes 1 and 2 not found in:\n%s", codes)
	}
	for _, entry := range []string{codes[one:two], codes[two:]} {
		if !strings.Contains(entry, "ResourceList is still written") {
			t.Errorf("the function's help does not say the ResourceList is written:%s", entry)
		}
	}
}
