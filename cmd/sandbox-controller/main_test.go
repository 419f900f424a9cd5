package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUsage: every way to start the controller wrongly exits 2 with a message naming the
// problem, before it looks for a cluster; --help exits 0 and lists the flags;
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
		"help":                 {args: []string{"--help"}, wantCode: 0, wantErr: "--render-config"},
		"version":              {args: []string{"--version"}, wantCode: 0, wantOut: "sandbox-controller version "},
		"unknown flag":         {args: []string{"--nope"}, wantCode: 2, wantErr: "flag provided but not defined: -nope"},
		"bad number":           {args: []string{"--sandbox-workers", "x"}, wantCode: 2, wantErr: "-sandbox-workers"},
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
	f, _, err := parseFlags(nil, io.Discard)
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
