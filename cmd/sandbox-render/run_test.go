package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/internal/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
)

func TestRunRendersTheBundledExample(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"render"}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
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

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: x\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		"help":              {args: []string{"--help"}, wantCode: exitOK, wantStdout: "Exit codes:"},
		"render help":       {args: []string{"render", "--help"}, wantCode: exitOK, wantStdout: "Exit codes:"},
		"unknown flag":      {args: []string{"render", "--nope"}, wantCode: exitUsage, wantStderr: "unknown flag: --nope"},
		"unknown command":   {args: []string{"rendr"}, wantCode: exitUsage, wantStderr: "unknown command"},
		"no command":        {args: nil, stdin: "kind: Sandbox\n", wantCode: exitUsage, wantStderr: "not a KRM ResourceList"},
		"missing file":      {args: []string{"render", filepath.Join(dir, "absent.yaml")}, wantCode: exitUsage, wantStderr: "no such file"},
		"invalid object":    {args: []string{"render", bad}, wantCode: exitFindings, wantStderr: bad + ": document 1 (line 1): error: Sandbox x: spec.podTemplate: Required value"},
		"validate invalid":  {args: []string{"validate", bad}, wantCode: exitFindings, wantStderr: "spec.podTemplate: Required value"},
		"validate clean":    {args: []string{"validate", "-"}, stdin: string(example), wantCode: exitOK, wantStderr: "1 objects checked: no problems"},
		"empty directory":   {args: []string{"render", t.TempDir()}, wantCode: exitUsage, wantStderr: "no *.yaml"},
		"stdin":             {args: []string{"render", "-"}, stdin: string(example), wantCode: exitOK, wantStdout: "kind: Pod"},
		"bad config":        {args: []string{"render", "--config", bad}, wantCode: exitUsage, wantStderr: "functionConfig"},
		"build missing dir": {args: []string{"build", filepath.Join(dir, "nowhere")}, wantCode: exitFindings, wantStderr: "nowhere"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr does not contain %q:\n%s", tc.wantStderr, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout does not contain %q:\n%s", tc.wantStdout, stdout.String())
			}
			if tc.wantCode != exitOK && stdout.Len() > 0 {
				t.Errorf("wrote output despite failing:\n%s", stdout.String())
			}
		})
	}
}

// TestBuildOutputDir: build --output-dir writes one file per object plus a kustomization.yaml,
// and removes stale YAML files left by an earlier build.
func TestBuildOutputDir(t *testing.T) {
	self := testenv.SandboxRender(t)
	out := t.TempDir()
	stale := filepath.Join(out, "v1_pod_gone.yaml")
	if err := os.WriteFile(stale, []byte("kind: Pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "build", filepath.Join(testenv.RepoRoot(), "overlays", "airgapped"), "--output-dir", out)
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale file survived: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for _, n := range []string{"kustomization.yaml", "networking.k8s.io_v1_networkpolicy_python-runtime-network-policy.yaml", "v1_pod_python-runtime-7nx88.yaml"} {
		if !slices.Contains(names, n) {
			t.Errorf("%s not written; got %v", n, names)
		}
	}
	if !strings.Contains(string(msg), "wrote ") {
		t.Errorf("no progress line on stderr: %s", msg)
	}
}
