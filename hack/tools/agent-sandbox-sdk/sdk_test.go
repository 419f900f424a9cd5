// Package sdk is upstream agent-sandbox's Go SDK (clients/go/sandbox of the version go.mod
// requires) used as its README and its sandboxd example client use it, against whatever cluster
// KUBECONFIG names. e2e/upstream_test.go runs it on the real node against this repository's
// controller and router (`make e2e-upstream-node`); it lives in a module of its own so that the
// SDK and its dependencies never enter the main module's go.mod.
package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
)

// warmPoolEnv names the SandboxWarmPool to claim from, in the SDK's default namespace; without
// it the test skips, since it needs a cluster whose pool runs sandboxd.
const warmPoolEnv = "SANDBOX_SDK_WARMPOOL"

// StepPrefix starts each line that reports a step's latency on standard output, tab-separated:
// the prefix, the step, the duration in milliseconds. e2e/upstream_test.go reads them into its table.
const StepPrefix = "sdk-step"

// TestGoSDKSandboxd is upstream's sandboxd example client (examples/sandboxd-sandbox/client) as
// a test: a sandbox from a warm pool, a command through sandboxd's gRPC ProcessService, a file
// written and read back through its REST filesystem (and seen by a command), the sandbox deleted,
// and its claim and Sandbox gone. Every option is the SDK's default except Runtime: in v1.0.1 the
// default runtime is the legacy Python runtime behind the router, and sandboxd is reached only
// with RuntimeSandboxd, which port-forwards to the sandbox's Pod itself.
func TestGoSDKSandboxd(t *testing.T) {
	pool := os.Getenv(warmPoolEnv)
	if pool == "" {
		t.Skipf("%s is not set: the name of a SandboxWarmPool of sandboxd in namespace default", warmPoolEnv)
	}
	ctx := t.Context()
	step := func(name string, f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		took := time.Since(start)
		fmt.Printf("%s\t%s\t%.1f ms\n", StepPrefix, name, took.Seconds()*1000)
		if err != nil {
			t.Fatalf("%s (after %v): %v", name, took.Round(time.Millisecond), err)
		}
	}

	var client *sandbox.Client
	step("new client", func() (err error) {
		client, err = sandbox.NewClient(ctx, sandbox.Options{Runtime: sandbox.RuntimeSandboxd})
		return err
	})
	t.Cleanup(func() { client.DeleteAll(context.Background()) })

	var sb *sandbox.Sandbox
	step("create a sandbox from the warm pool (claim Ready, pod port-forward)", func() (err error) {
		// "" is the SDK's default namespace.
		sb, err = client.CreateSandbox(ctx, pool, "")
		return err
	})
	claim, name := sb.ClaimName(), sb.SandboxName()
	t.Logf("claim %s, Sandbox %s, Pod %s (%s)", claim, name, sb.PodName(), sb.PodIP())

	step("run a command through sandboxd", func() error {
		res, err := sb.Run(ctx, "echo hello from sandboxd; id -u; pwd")
		if err != nil {
			return err
		}
		want := "hello from sandboxd\n1000\n/workspace\n"
		if res.ExitCode != 0 || res.Stdout != want {
			return fmt.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and stdout %q", res.ExitCode, res.Stdout, res.Stderr, want)
		}
		return nil
	})

	content := []byte("written by upstream's Go SDK at " + time.Now().UTC().Format(time.RFC3339Nano) + "\n")
	step("write a file", func() error { return sb.Write(ctx, "greeting.txt", content) })
	step("read the file back", func() error {
		got, err := sb.Read(ctx, "greeting.txt")
		if err != nil {
			return err
		}
		if !bytes.Equal(got, content) {
			return fmt.Errorf("read %q, want %q", got, content)
		}
		return nil
	})
	step("a command sees the file", func() error {
		res, err := sb.Run(ctx, "cat greeting.txt")
		if err != nil {
			return err
		}
		if res.ExitCode != 0 || res.Stdout != string(content) {
			return fmt.Errorf("cat: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, res.Stdout, res.Stderr, content)
		}
		return nil
	})

	step("delete the sandbox", func() error { return client.DeleteSandbox(ctx, claim, "") })

	h, err := sandbox.NewK8sHelper(nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	const namespace = "default"
	step("the claim and its Sandbox gone", func() error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var errs []error
			if _, err := h.ExtensionsClient.SandboxClaims(namespace).Get(ctx, claim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("SandboxClaim %s still there (%v)", claim, err))
			}
			if _, err := h.AgentsClient.Sandboxes(namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("Sandbox %s still there (%v)", name, err))
			}
			if len(errs) == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return errors.Join(errs...)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
