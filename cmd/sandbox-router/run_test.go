package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsage: --help explains (with the example), --version answers, and every bad flag is a
// usage error (exit 2) that names the flag, before anything connects anywhere.
func TestUsage(t *testing.T) {
	cases := map[string]struct {
		reason   string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		"help":            {reason: "--help", args: []string{"--help"}, wantCode: 0, wantOut: "--authz-cache-ttl"},
		"help example":    {reason: "the example is shown", args: []string{"--help"}, wantCode: 0, wantOut: "sandbox-router --kubeconfig ~/.kube/config --namespaces team-a,team-b --authz kubernetes"},
		"help exit codes": {reason: "exit codes are documented", args: []string{"--help"}, wantCode: 0, wantOut: "Exit codes:"},
		"version":         {reason: "--version", args: []string{"--version"}, wantCode: 0, wantOut: "sandbox-router version"},
		"authz":           {reason: "an unknown mode", args: []string{"--authz", "tokenreview"}, wantCode: 2, wantErr: `--authz: Unsupported value: "tokenreview"`},
		"audiences":       {reason: "audiences without authz", args: []string{"--authz-audiences", "x"}, wantCode: 2, wantErr: "--authz-audiences: Forbidden"},
		"namespaces":      {reason: "a namespace that cannot exist", args: []string{"--namespaces", "team-a,Team_B"}, wantCode: 2, wantErr: `--namespaces: Invalid value: "Team_B"`},
		"negative":        {reason: "a negative duration", args: []string{"--proxy-timeout", "-1s"}, wantCode: 2, wantErr: "--proxy-timeout: Invalid value: -1s"},
		"log level":       {reason: "an unknown level", args: []string{"--log-level", "loud"}, wantCode: 2, wantErr: "--log-level: Unsupported value"},
		"unknown flag":    {reason: "cobra's error", args: []string{"--listne", ":8080"}, wantCode: 2, wantErr: "unknown flag: --listne"},
		"arguments":       {reason: "no positional arguments", args: []string{"extra"}, wantCode: 2, wantErr: "unknown command"},
		"bad kubeconfig":  {reason: "a missing kubeconfig is a start-up failure", args: []string{"--kubeconfig", "/nonexistent/kubeconfig"}, wantCode: 1, wantErr: "loading the API server configuration"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", tc.reason, code, tc.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("%s: stdout lacks %q:\n%s", tc.reason, tc.wantOut, stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.reason, tc.wantErr, stderr.String())
			}
		})
	}
}

// TestNoKubeconfig: outside a cluster with no kubeconfig anywhere, the router says what to pass
// (--kubeconfig), not client-go's KUBERNETES_MASTER, and exits 1 before listening.
func TestNoKubeconfig(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--listen", "127.0.0.1:0"}, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1\nstderr: %s", code, stderr.String())
	}
	if got := stderr.String(); !strings.Contains(got, "pass --kubeconfig FILE") || strings.Contains(got, "KUBERNETES_MASTER") {
		t.Errorf("stderr = %q, want the --kubeconfig hint and no KUBERNETES_MASTER", got)
	}
}
