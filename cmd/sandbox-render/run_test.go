package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// atTerminal makes the tests' standard input count as a person at a terminal.
func atTerminal(t *testing.T) {
	t.Helper()
	old := terminal
	terminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { terminal = old })
}

func TestRunRendersTheBundledExampleAtATerminal(t *testing.T) {
	atTerminal(t)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"render"}, strings.NewReader(""), &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	objs, err := manifest.Parse("stdout", stdout.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	want := []string{"PersistentVolumeClaim/workspace-python-sandbox", "Pod/python-sandbox", "Sandbox/python-sandbox", "Service/python-sandbox"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("rendered objects (-want +got):\n%s", diff)
	}
}

// writeTree writes files (path: content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	sandboxYAML = `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: piped
  namespace: ns
spec:
  podTemplate:
    spec:
      containers:
      - name: c
        image: python:3.12-slim
`
	privilegedYAML = `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: root
  namespace: ns
spec:
  podTemplate:
    spec:
      containers:
      - name: c
        image: python:3.12-slim
        securityContext:
          privileged: true
`
	restrictedConfig = `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
metadata:
  name: render
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: ./sandbox-render
spec:
  policies:
    packs:
      restricted: true
`
	kustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- sandbox.yaml
transformers:
- render.yaml
`
)

// TestRunExitCodes runs every command on good and bad input: 0 when done, 1 for problems in the
// input, 2 for usage, configuration, kustomize and I/O errors and for nothing done; errors on
// standard error, nothing on standard output when failing.
func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeTree(t, dir, map[string]string{
		"bad.yaml": "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: x\nspec: {}\n",
		// A tree whose render.yaml asks for the restricted pack, and a privileged Sandbox.
		"restricted/kustomization.yaml": kustomization,
		"restricted/render.yaml":        restrictedConfig,
		"restricted/sandbox.yaml":       privilegedYAML,
		// The same Sandbox, allowed, to see the config applied and not emitted.
		"plain/kustomization.yaml": kustomization,
		"plain/render.yaml":        restrictedConfig,
		"plain/sandbox.yaml":       sandboxYAML,
		// Custom resources and no render transformer.
		"norender/kustomization.yaml": "resources:\n- sandbox.yaml\n",
		"norender/sandbox.yaml":       sandboxYAML,
		// The render config listed as a resource.
		"asresource/kustomization.yaml": "resources:\n- sandbox.yaml\n- render.yaml\n",
		"asresource/sandbox.yaml":       sandboxYAML,
		"asresource/render.yaml":        restrictedConfig,
		"onlyconfig/render.yaml":        restrictedConfig,
		// A config in validate mode: render renders nothing, which is an error.
		"validatemode/render.yaml":  strings.Replace(restrictedConfig, "spec:\n", "spec:\n  mode: validate\n", 1),
		"validatemode/sandbox.yaml": sandboxYAML,
		// YAML kustomize cannot read.
		"broken/kustomization.yaml": "resources: [\n",
		// A claim under a template that forbids env, without originAnnotations.
		"findings/kustomization.yaml":  "namespace: team-a\nresources:\n- template.yaml\n- claim.yaml\ntransformers:\n- render.yaml\n",
		"findings/render.yaml":         restrictedConfig,
		"findings/template.yaml":       "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata:\n  name: python\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: python\n        image: python:3.12\n  envVarsInjectionPolicy: Disallowed\n---\napiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata:\n  name: python\nspec:\n  replicas: 0\n  sandboxTemplateRef:\n    name: python\n",
		"findings/claim.yaml":          "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata:\n  name: my-claim\nspec:\n  warmPoolRef:\n    name: python\n  env:\n  - name: TASK\n    value: x\n",
		"badconfig/kustomization.yaml": kustomization,
		"badconfig/render.yaml":        strings.Replace(restrictedConfig, "restricted: true", "restrictd: true", 1),
		"badconfig/sandbox.yaml":       sandboxYAML,
	})
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	overlay := filepath.Join(testenv.RepoRoot(), "overlays", "kind")
	cases := map[string]struct {
		reason     string
		args       []string
		stdin      io.Reader
		wantCode   int
		wantStdout string
		wantStderr string
		notStdout  string
	}{
		"help":                           {args: []string{"--help"}, wantCode: cli.ExitOK, wantStdout: "Exit codes"},
		"render help":                    {args: []string{"render", "--help"}, wantCode: cli.ExitOK, wantStdout: "Exit codes"},
		"version":                        {reason: "--version from the build info", args: []string{"--version"}, wantCode: cli.ExitOK, wantStdout: "sandbox-render "},
		"unknown flag":                   {args: []string{"render", "--nope"}, wantCode: cli.ExitUsage, wantStderr: "unknown flag: --nope"},
		"unknown command":                {reason: "a mistyped command gets a suggestion", args: []string{"rendr"}, wantCode: cli.ExitUsage, wantStderr: "Did you mean this?\n\trender"},
		"no command, not a ResourceList": {args: nil, stdin: strings.NewReader("kind: Sandbox\n"), wantCode: cli.ExitUsage, wantStderr: "not a KRM ResourceList"},
		"no command, /dev/null": {reason: "/dev/null is a character device but no terminal",
			args: nil, stdin: devNull, wantCode: cli.ExitUsage, wantStderr: "standard input is empty"},
		"fn, bad config": {reason: "a configuration error is 2 in the function too",
			args: []string{"fn"}, stdin: strings.NewReader("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  spec:\n    mdoe: expand\n"),
			wantCode: cli.ExitUsage, wantStderr: "mdoe", wantStdout: "results:"},
		"fn, findings": {args: []string{"fn"}, stdin: strings.NewReader("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: agents.x-k8s.io/v1beta1\n  kind: Sandbox\n  metadata:\n    name: x\n  spec: {}\n"),
			wantCode: cli.ExitFailure, wantStderr: "spec.podTemplate: Required value", wantStdout: "results:"},
		"fn, empty input":  {args: []string{"fn"}, stdin: strings.NewReader(""), wantCode: cli.ExitUsage, wantStderr: "ResourceList"},
		"missing file":     {args: []string{"render", filepath.Join(dir, "absent.yaml")}, wantCode: cli.ExitUsage, wantStderr: "no such file"},
		"invalid object":   {args: []string{"render", bad}, wantCode: cli.ExitFailure, wantStderr: bad + ": document 1 (line 5): error: Sandbox x: spec.podTemplate: Required value"},
		"validate invalid": {args: []string{"validate", bad}, wantCode: cli.ExitFailure, wantStderr: "spec.podTemplate: Required value"},
		"validate clean":   {args: []string{"validate", "-"}, stdin: bytes.NewReader(example), wantCode: cli.ExitOK, wantStderr: "1 objects checked: no problems"},
		"empty directory":  {args: []string{"render", t.TempDir()}, wantCode: cli.ExitUsage, wantStderr: "no *.yaml"},
		"stdin":            {args: []string{"render", "-"}, stdin: bytes.NewReader(example), wantCode: cli.ExitOK, wantStdout: "kind: Pod"},
		"piped stdin":      {reason: "piped standard input is read, not the bundled example", args: []string{"render"}, stdin: strings.NewReader(sandboxYAML), wantCode: cli.ExitOK, wantStdout: "name: piped", notStdout: "python-sandbox"},
		"empty stdin":      {args: []string{"render"}, stdin: devNull, wantCode: cli.ExitUsage, wantStderr: "standard input: it is empty"},
		"bad config":       {args: []string{"render", "--config", bad, "-"}, stdin: bytes.NewReader(example), wantCode: cli.ExitUsage, wantStderr: "functionConfig"},
		"validate DIR":     {reason: "validate honours the directory's SandboxRender config", args: []string{"validate", filepath.Join(dir, "restricted")}, wantCode: cli.ExitFailure, wantStderr: "restricted policy pack"},
		"render DIR": {reason: "render honours the config and emits its copy for the cluster, without the function's annotation", args: []string{"render", filepath.Join(dir, "plain")}, wantCode: cli.ExitOK,
			wantStdout: "kind: SandboxRender\nmetadata:\n  name: render\n  namespace: ns\nspec:\n  policies:\n    packs:\n      restricted: true\n", notStdout: "config.kubernetes.io/function"},
		"render DIR config": {args: []string{"render", filepath.Join(dir, "plain")}, wantCode: cli.ExitOK, wantStdout: "kind: Pod", notStdout: "kind: Kustomization"},
		"validate a kustomization of bases": {reason: "0 objects checked is not success: the hint names build",
			args: []string{"validate", overlay}, wantCode: cli.ExitUsage, wantStderr: "sandbox-render build " + overlay},
		"render nothing": {args: []string{"render", filepath.Join(dir, "onlyconfig")}, wantCode: cli.ExitUsage, wantStderr: "no objects in the input"},
		"render validate mode": {reason: "custom resources and nothing rendered is an error with a hint",
			args: []string{"render", filepath.Join(dir, "validatemode")}, wantCode: cli.ExitUsage, wantStderr: "use sandbox-render validate"},
		"render bad config": {args: []string{"render", filepath.Join(dir, "badconfig")}, wantCode: cli.ExitUsage, wantStderr: "restrictd"},
		"now, bad value":    {reason: "--now takes RFC 3339", args: []string{"render", "--now", "yesterday", "-"}, stdin: bytes.NewReader(example), wantCode: cli.ExitUsage, wantStderr: `--now "yesterday": not an RFC 3339 time`},
		"now, expired": {reason: "a preview past a shutdownTime warns on the field and leaves out the Pod",
			args: []string{"render", "--now", "2031-01-01T00:00:00Z", "-"}, stdin: strings.NewReader(strings.Replace(sandboxYAML, "spec:\n", "spec:\n  shutdownTime: \"2030-01-01T00:00:00Z\"\n", 1)),
			wantCode: cli.ExitOK, wantStderr: "warning: Sandbox ns/piped: spec.shutdownTime: 2030-01-01T00:00:00Z has passed at the preview's time 2031-01-01T00:00:00Z", notStdout: "kind: Pod"},
		"build":             {args: []string{"build", overlay}, wantCode: cli.ExitOK, wantStdout: "kind: Pod"},
		"build missing dir": {reason: "a missing directory is an I/O error", args: []string{"build", filepath.Join(dir, "nowhere")}, wantCode: cli.ExitUsage, wantStderr: "nowhere"},
		"build broken YAML": {reason: "YAML that cannot be read is a problem of the input (it was 2, kustomize's error)",
			args: []string{"build", filepath.Join(dir, "broken")}, wantCode: cli.ExitFailure, wantStderr: filepath.Join(dir, "broken", "kustomization.yaml") + ": document 1, line 1: YAML syntax"},
		"build bad config": {args: []string{"build", filepath.Join(dir, "badconfig")}, wantCode: cli.ExitUsage, wantStderr: "restrictd"},
		"build findings": {reason: "a finding names the file without originAnnotations, with no kustomize noise",
			args: []string{"build", filepath.Join(dir, "findings")}, wantCode: cli.ExitFailure,
			wantStderr: filepath.Join(dir, "findings", "claim.yaml") + ": document 1 (line 8): error: SandboxClaim team-a/my-claim: spec.env: Forbidden"},
		"build restricted": {args: []string{"build", filepath.Join(dir, "restricted")}, wantCode: cli.ExitFailure, wantStderr: "sandbox.yaml: document 1 (line 13): error: Sandbox ns/root: spec.podTemplate.spec.containers[0].securityContext.privileged"},
		"build without render": {reason: "custom resources and nothing rendered is an error with a hint",
			args: []string{"build", filepath.Join(dir, "norender")}, wantCode: cli.ExitUsage, wantStderr: "no SandboxRender transformer"},
		"build config as resource": {args: []string{"build", filepath.Join(dir, "asresource")}, wantCode: cli.ExitUsage, wantStderr: "under transformers:, not resources:"},
		"build both outputs":       {args: []string{"build", overlay, "-o", filepath.Join(dir, "a.yaml"), "--output-dir", filepath.Join(dir, "d")}, wantCode: cli.ExitUsage, wantStderr: "exclude each other"},
		"discover":                 {args: []string{"discover", overlay}, wantCode: cli.ExitOK, wantStdout: "render.yaml\n"},
		"discover nothing":         {args: []string{"discover", filepath.Join(testenv.RepoRoot(), "bases", "python-runtime")}, wantCode: cli.ExitOK},
		"discover missing":         {args: []string{"discover", filepath.Join(dir, "nowhere")}, wantCode: cli.ExitUsage, wantStderr: "nowhere"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stdin := tc.stdin
			if stdin == nil {
				stdin = strings.NewReader("")
			}
			var stdout, stderr bytes.Buffer
			code := run(tc.args, stdin, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("%s: exit %d, want %d; stderr:\n%s", tc.reason, code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("%s: stderr does not contain %q:\n%s", tc.reason, tc.wantStderr, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("%s: stdout does not contain %q:\n%s", tc.reason, tc.wantStdout, stdout.String())
			}
			if tc.notStdout != "" && strings.Contains(stdout.String(), tc.notStdout) {
				t.Errorf("%s: stdout contains %q:\n%s", tc.reason, tc.notStdout, stdout.String())
			}
			if tc.wantCode != cli.ExitOK && stdout.Len() > 0 && (len(tc.args) == 0 || tc.args[0] != "fn") {
				t.Errorf("wrote output despite failing:\n%s", stdout.String())
			}
			if strings.Contains(stderr.String(), "couldn't execute function") {
				t.Errorf("kustomize's noise on stderr:\n%s", stderr.String())
			}
		})
	}
}
