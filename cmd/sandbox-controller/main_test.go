package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/internal/version"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestUsage: every way to start the controller wrongly exits 2 with a message naming the
// problem, before it looks for a cluster; --help exits 0 and lists the flags on stdout;
// --version prints the version and commit on stdout.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	withNow := filepath.Join(dir, "now.yaml")
	if err := os.WriteFile(withNow, []byte("apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  now: \"2026-06-01T12:00:00Z\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  clusterDomian: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args     []string
		wantCode int
		wantErr  string
		wantOut  string
	}{
		"help":                 {args: []string{"--help"}, wantCode: 0, wantOut: "--render-config"},
		"version":              {args: []string{"--version"}, wantCode: 0, wantOut: "sandbox-controller version "},
		"unknown flag":         {args: []string{"--nope"}, wantCode: 2, wantErr: "unknown flag: --nope"},
		"bad number":           {args: []string{"--sandbox-workers", "x"}, wantCode: 2, wantErr: `invalid argument "x" for "--sandbox-workers" flag`},
		"no workers":           {args: []string{"--sandbox-workers", "0"}, wantCode: 2, wantErr: "at least 1"},
		"no claim workers":     {args: []string{"--claim-workers", "0"}, wantCode: 2, wantErr: "--claim-workers"},
		"unknown reconciler":   {args: []string{"--controllers", "sandbox,pods"}, wantCode: 2, wantErr: `unknown reconciler "pods"`},
		"no reconciler":        {args: []string{"--controllers", ","}, wantCode: 2, wantErr: "at least one"},
		"bad rate":             {args: []string{"--kube-api-qps", "-1"}, wantCode: 2, wantErr: "must be positive"},
		"rate not a number":    {args: []string{"--kube-api-qps", "NaN"}, wantCode: 2, wantErr: "must be positive"},
		"infinite rate":        {args: []string{"--kube-api-qps", "+Inf"}, wantCode: 2, wantErr: "must be positive"},
		"empty pack list":      {args: []string{"--policy-packs", ","}, wantCode: 2, wantErr: `--policy-packs "," names nothing`},
		"empty domain list":    {args: []string{"--allowed-label-domains", " , "}, wantCode: 2, wantErr: "--allowed-label-domains"},
		"bad label domain":     {args: []string{"--allowed-label-domains", "ok.io,Not_A_Domain"}, wantCode: 2, wantErr: "spec.allowedLabelDomains[1]"},
		"bad namespace":        {args: []string{"--namespaces", "team-a,Team_B"}, wantCode: 2, wantErr: `namespace "Team_B"`},
		"bad lease namespace":  {args: []string{"--leader-election-namespace", "a.b"}, wantCode: 2, wantErr: `namespace "a.b"`},
		"unknown pack":         {args: []string{"--policy-packs", "restricted,nope"}, wantCode: 2, wantErr: `unknown pack "nope"`},
		"arguments":            {args: []string{"extra"}, wantCode: 2, wantErr: "takes flags only"},
		"bad metrics address":  {args: []string{"--metrics-bind-address", "foo"}, wantCode: 2, wantErr: `--metrics-bind-address "foo": want host:port`},
		"bad probe port":       {args: []string{"--health-probe-bind-address", ":80800"}, wantCode: 2, wantErr: `--health-probe-bind-address ":80800": port "80800"`},
		"bad pprof address":    {args: []string{"--pprof-bind-address", "localhost"}, wantCode: 2, wantErr: "--pprof-bind-address"},
		"bad webhook port":     {args: []string{"--webhook-port", "70000"}, wantCode: 2, wantErr: "--webhook-port 70000: want 1-65535"},
		"no webhook namespace": {args: []string{"--webhook-namespace="}, wantCode: 2, wantErr: "must not be empty"},
		"missing config":       {args: []string{"--render-config", filepath.Join(dir, "absent.yaml")}, wantCode: 2, wantErr: "absent.yaml"},
		"config with a typo":   {args: []string{"--render-config", typo}, wantCode: 2, wantErr: "clusterDomian"},
		"config with spec.now": {args: []string{"--render-config", withNow}, wantCode: 2, wantErr: "spec.now"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.wantCode {
				t.Errorf("exit %d, want %d\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr does not name %q:\n%s", tc.wantErr, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout does not say %q:\n%s", tc.wantOut, stdout.String())
			}
		})
	}
}

// TestLinksOnlyWhatItRuns: the controller's peak resident memory has a target (under 80 MiB at
// 1,000 Sandboxes), and about a third of it is the binary's own pages, which grow with every
// package linked (their init functions alone touch most of them). It reads its render options
// with renderconfig and must not link the KRM function's machinery or the schema validation
// behind it: those added 6 MB of resident memory at start.
func TestLinksOnlyWhatItRuns(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{
		"github.com/sandbox-gitops/sandbox-gitops/krm",
		"github.com/sandbox-gitops/sandbox-gitops/manifest",
		"github.com/sandbox-gitops/sandbox-gitops/bundle",
		"sigs.k8s.io/kustomize/kyaml/fn/framework",
		"github.com/google/cel-go/cel",
		"k8s.io/apiextensions-apiserver/pkg/apiserver/validation",
	}
	var linked []string
	for _, f := range forbidden {
		if slices.Contains(deps, f) {
			linked = append(linked, f)
		}
	}
	if diff := cmp.Diff([]string(nil), linked); diff != "" {
		t.Errorf("sandbox-controller links packages it does not run (-want +got); see `go mod why -m` or `go list -deps`:\n%s", diff)
	}
}

// TestDefaultPortsLeaveTheRouterPort: run on a workstation with no flags, the controller
// binds no port the README's router command uses (--listen 127.0.0.1:8080, metrics :9090);
// metrics are off by default, as kubebuilder scaffolds them, and config/manager turns them on.
func TestDefaultPortsLeaveTheRouterPort(t *testing.T) {
	f, _, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.metricsAddr != "0" {
		t.Errorf("--metrics-bind-address defaults to %q, want 0 (off)", f.metricsAddr)
	}
	for _, addr := range []string{f.metricsAddr, f.probeAddr, f.pprofAddr} {
		if strings.HasSuffix(addr, ":8080") || strings.HasSuffix(addr, ":9090") {
			t.Errorf("a default address %q takes one of the router's ports", addr)
		}
	}
}

// TestUnreachableAPIServer: a kubeconfig naming a server that is not there ends the start in
// one line, with no stack trace, naming the server and what to check.
func TestUnreachableAPIServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there now
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://" + addr + "', insecure-skip-tls-verify: true}}]\n" +
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--kubeconfig", kubeconfig, "--health-probe-bind-address", "0"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	checkExitLine(t, stderr.String(), "cannot reach the API server at https://"+addr, "check --kubeconfig")
}

// checkExitLine: a failed start says why in one line, with no stack trace, holding every want.
func checkExitLine(t *testing.T, stderr string, wants ...string) {
	t.Helper()
	got := strings.TrimSpace(stderr)
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\n") || strings.Contains(got, "stacktrace") {
		t.Errorf("stderr is not one line:\n%s", got)
	}
}

// TestCommandLine: the answers of the command line itself, whole: what goes to stdout and
// stderr, and the exit code. Errors are one line on stderr and nothing on stdout.
func TestCommandLine(t *testing.T) {
	type result struct {
		Code           int
		Stdout, Stderr string
	}
	usageError := func(msg string) result { return result{Code: 2, Stderr: "sandbox-controller: " + msg + "\n"} }
	cases := map[string]struct {
		reason string
		args   []string
		want   result
	}{
		"version": {
			reason: "--version prints the one version line of every command, and nothing else",
			args:   []string{"--version"},
			want:   result{Code: 0, Stdout: version.String("sandbox-controller") + "\n"},
		},
		"version with bad values": {
			reason: "--version answers whatever the other flags and arguments say",
			args:   []string{"--sandbox-workers", "0", "--version", "extra"},
			want:   result{Code: 0, Stdout: version.String("sandbox-controller") + "\n"},
		},
		"timing annotations off without the annotations": {
			reason: "upstream's flag turns off part of --upstream-annotations; alone it would do nothing",
			args:   []string{"--disable-claim-observability-annotations"},
			want:   usageError("--disable-claim-observability-annotations turns off part of --upstream-annotations, which is off: pass both, or neither"),
		},
		"unknown flag": {
			reason: "pflag's message, as sandbox-router's, with no usage text",
			args:   []string{"--nope"},
			want:   usageError("unknown flag: --nope"),
		},
		"unknown flag with a value": {
			reason: "the value is not mistaken for an argument",
			args:   []string{"--nope=1"},
			want:   usageError("unknown flag: --nope"),
		},
		"single-dash long flag": {
			reason: "Go's flag package took -metrics-bind-address; pflag reads it as one-letter flags, so the error names the two-dash form",
			args:   []string{"-metrics-bind-address", ":8080"},
			want:   usageError("flag -metrics-bind-address needs two dashes: --metrics-bind-address"),
		},
		"single-dash long flag with =": {
			reason: "the value is not part of the flag's name",
			args:   []string{"--leader-elect", "-metrics-bind-address=:8080"},
			want:   usageError("flag -metrics-bind-address needs two dashes: --metrics-bind-address"),
		},
		"single-dash version": {
			reason: "-version is not -v followed by -e...: the two-dash form is named",
			args:   []string{"-version"},
			want:   usageError("flag -version needs two dashes: --version"),
		},
		"single-dash help": {
			reason: "-help is not -h followed by -e...: the two-dash form is named",
			args:   []string{"-help"},
			want:   usageError("flag -help needs two dashes: --help"),
		},
		"single-dash kubeconfig": {
			reason: "a flag added from a Go FlagSet is named the same way",
			args:   []string{"-kubeconfig", "/dev/null"},
			want:   usageError("flag -kubeconfig needs two dashes: --kubeconfig"),
		},
		"single-dash zap flag": {
			reason: "and so is a --zap-* flag",
			args:   []string{"-zap-log-level=debug"},
			want:   usageError("flag -zap-log-level needs two dashes: --zap-log-level"),
		},
		"single-dash unknown flag": {
			reason: "a name that is no flag at all keeps pflag's message",
			args:   []string{"-nope"},
			want:   usageError(`unknown shorthand flag: 'n' in -nope`),
		},
		"single dash after --": {
			reason: "after -- nothing is a flag: an argument, refused as such",
			args:   []string{"--", "-metrics-bind-address"},
			want:   usageError(`unexpected arguments ["-metrics-bind-address"]: sandbox-controller takes flags only`),
		},
		"Go FlagSet flags take two dashes": {
			reason: "--kubeconfig and --zap-* parse double-dash; validation then fails on the workers, before any cluster is sought",
			args:   []string{"--kubeconfig", "/dev/null", "--zap-devel", "--zap-log-level=debug", "--sandbox-workers=0"},
			want:   usageError("--sandbox-workers, --template-workers, --claim-workers and --warm-pool-workers must be at least 1"),
		},
		"bad zap value": {
			reason: "a Go flag.Value's error is pflag's invalid argument",
			args:   []string{"--zap-encoder", "yaml"},
			want:   usageError(`invalid argument "yaml" for "--zap-encoder" flag: invalid encoder value "yaml"`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			got := result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: sandbox-controller %s (-want +got):\n%s", tc.reason, strings.Join(tc.args, " "), diff)
			}
		})
	}
}

// TestHelp: --help (and -h) print the help on stdout and exit 0; every flag is listed with two
// dashes, no long flag with one, and the examples are shown.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{arg}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
				t.Fatalf("exit %d, want 0, and stderr %q, want nothing", code, stderr.String())
			}
			help := stdout.String()

			// The flags the Flags section lists, each as its line begins: "--name" or "-x, --name".
			_, list, ok := strings.Cut(help, "\nFlags:\n")
			if !ok {
				t.Fatalf("no Flags section:\n%s", help)
			}
			var listed []string
			for _, line := range strings.Split(strings.TrimRight(list, "\n"), "\n") {
				m := flagLine.FindStringSubmatch(line)
				if m == nil {
					t.Errorf("a Flags line that is not a two-dash flag: %q", line)
					continue
				}
				listed = append(listed, m[1])
			}
			var defined []string
			newCommand(&flags{}, io.Discard, io.Discard, nil).Flags().VisitAll(func(f *pflag.Flag) { defined = append(defined, f.Name) })
			defined = append(defined, "help") // cobra's, added as the command runs
			slices.Sort(defined)
			if diff := cmp.Diff(defined, listed); diff != "" {
				t.Errorf("the flags --help lists (-defined +listed):\n%s", diff)
			}

			if got := singleDash.FindAllString(help, -1); len(got) > 0 {
				t.Errorf("--help shows long flags with one dash: %q", got)
			}
			for _, want := range []string{
				"Examples:\n",
				"  sandbox-controller --kubeconfig ~/.kube/config --render-config render.yaml --enable-webhook=false\n",
				"  sandbox-controller --leader-elect --leader-election-namespace=sandbox-gitops-system ",
				"Exit codes:\n",
			} {
				if !strings.Contains(help, want) {
					t.Errorf("--help lacks %q:\n%s", want, help)
				}
			}
			for _, kind := range []string{"Sandbox ", "SandboxTemplate ", "SandboxClaim ", "SandboxWarmPool "} {
				if !strings.Contains(help, "\n  "+kind) {
					t.Errorf("--help's first paragraph does not say what the %sreconciler does", kind)
				}
			}
		})
	}
}

var (
	// flagLine is a line of pflag's flag list: an optional one-letter form, the two-dash name.
	flagLine = regexp.MustCompile(`^  (?:-[a-z], |    )--([a-z0-9][a-z0-9-]*)(?:[ =]|$)`)
	// singleDash is a long flag written with one dash, as Go's flag package prints them.
	singleDash = regexp.MustCompile("(?m)(?:^|[\\s(\"'`])-[a-z][a-z0-9]+(?:-[a-z0-9]+)*\\b")
)

// TestHelpExamples runs the examples of --help as far as a start goes without a cluster: their
// flags parse and are valid. The in-cluster one is config/manager's Deployment's arguments, with
// $(POD_NAMESPACE) as that Deployment's namespace, so the help cannot drift from the manifest.
func TestHelpExamples(t *testing.T) {
	var commands [][]string
	for _, line := range strings.Split(example, "\n") {
		if rest, ok := strings.CutPrefix(line, "  sandbox-controller "); ok {
			commands = append(commands, strings.Fields(rest))
		}
	}
	if len(commands) != 2 {
		t.Fatalf("the examples hold %d commands, want 2 (a workstation's, the cluster's):\n%s", len(commands), example)
	}

	// The workstation example names render.yaml in the current directory.
	t.Chdir(t.TempDir())
	if err := os.WriteFile("render.yaml", []byte("apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  clusterDomain: example.internal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range commands {
		if _, _, err := parseFlags(args); err != nil {
			t.Errorf("sandbox-controller %s: %v", strings.Join(args, " "), err)
		}
	}

	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var deploy appsv1.Deployment
	if err := yaml.UnmarshalStrict(b, &deploy); err != nil {
		t.Fatal(err)
	}
	if len(deploy.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("config/manager's Deployment has %d containers, want 1", len(deploy.Spec.Template.Spec.Containers))
	}
	var want []string
	for _, a := range deploy.Spec.Template.Spec.Containers[0].Args {
		want = append(want, strings.ReplaceAll(a, "$(POD_NAMESPACE)", deploy.Namespace))
	}
	if diff := cmp.Diff(want, commands[1]); diff != "" {
		t.Errorf("the in-cluster example is not config/manager's arguments (-manager.yaml +example):\n%s", diff)
	}
}

// parseFlags runs the command line on args up to the start: the flags and the options it would
// start the controller with, or the usage error.
func parseFlags(args []string) (*flags, *controller.Options, error) {
	f := &flags{}
	var opts *controller.Options
	cmd := newCommand(f, io.Discard, io.Discard, func(o *controller.Options) error { opts = o; return nil })
	if err := execute(cmd, args); err != nil {
		return nil, nil, err
	}
	if opts == nil {
		return nil, nil, errors.New("the command did not reach the start")
	}
	return f, opts, nil
}
