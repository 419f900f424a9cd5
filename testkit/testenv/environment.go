package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv/deathsig"
)

// Timeouts of a control plane, sized for a machine whose cores are busy with other work (load
// 15-26 on 2 cores was seen): envtest's defaults (20 s to start, 10 s for the CRDs) are for an
// idle one. The KUBEBUILDER_CONTROLPLANE_{START,STOP}_TIMEOUT variables still override the
// first two.
const (
	ControlPlaneStartTimeout = 2 * time.Minute
	// ControlPlaneStopTimeout is how long a process may take to end after SIGTERM before it
	// gets SIGKILL.
	ControlPlaneStopTimeout = 30 * time.Second
	CRDInstallTimeout       = 2 * time.Minute
)

// Environment is an envtest environment whose kube-apiserver and etcd never outlive the test
// binary: Start stops whatever it started when it fails, Stop stops both processes whatever else
// fails, one that ignores SIGTERM gets SIGKILL after ControlPlaneStopTimeout, and on Linux the
// kernel kills both when the test binary ends without stopping them (a panic, go test's
// -timeout, SIGKILL; see package deathsig). Every test that runs an API server starts it
// through one.
//
// Both processes keep their files in one directory of their own (Dir), which also holds the
// API server's certificates across a restart (StartAPIServerAgain).
type Environment struct {
	*envtest.Environment

	dir      string
	stopOnce sync.Once
	stopErr  error
}

// Wrap makes env an Environment. Set its fields (CRDs, timeouts, the API server's arguments)
// before Start as on env itself.
func Wrap(env *envtest.Environment) *Environment {
	return &Environment{Environment: env}
}

// Dir is the directory of the control plane's files (etcd's data, the API server's
// certificates), made by Start and removed by Stop.
func (e *Environment) Dir() string { return e.dir }

// Start starts kube-apiserver and etcd, installs the CRDs and returns the admin's config. When it
// fails, nothing it started is left running.
func (e *Environment) Start() (*rest.Config, error) {
	if err := e.prepare(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	var cfg *rest.Config
	start := func() error {
		var err error
		cfg, err = e.Environment.Start()
		return err
	}
	err := deathsig.Do(start)
	// envtest gives the default namespace a fixed 5 s to appear after the API server is
	// healthy, which a loaded machine can miss; another go at the same data usually finds it.
	if err != nil && strings.Contains(err.Error(), "default namespace didn't register") {
		fmt.Fprintf(os.Stderr, "testenv: %v; starting the control plane again\n", err)
		if stopErr := e.ControlPlane.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		} else {
			err = deathsig.Do(start)
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting kube-apiserver and etcd from %s: %w", BinDir(), err), e.Stop())
	}
	return cfg, nil
}

// StartForTest is Start for one test: it fails the test when the control plane does not start,
// and stops it when the test ends.
func (e *Environment) StartForTest(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := e.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return cfg
}

// prepare puts both processes' files under one directory, starts them through deathsig and
// sets the timeouts not set already.
func (e *Environment) prepare() error {
	if e.dir != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "sandbox-gitops-envtest-")
	if err != nil {
		return err
	}
	e.dir = dir
	for _, sub := range []string{"bin", "etcd", "apiserver"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	paths, err := deathsig.Wrap(filepath.Join(dir, "bin"), map[string]string{
		"kube-apiserver": filepath.Join(e.assets(), "kube-apiserver"),
		"etcd":           filepath.Join(e.assets(), "etcd"),
	})
	if err != nil {
		return err
	}
	apiServer := e.ControlPlane.GetAPIServer()
	if e.ControlPlane.Etcd == nil {
		e.ControlPlane.Etcd = &envtest.Etcd{}
	}
	etcd := e.ControlPlane.Etcd
	apiServer.Path, etcd.Path = paths["kube-apiserver"], paths["etcd"]
	if apiServer.CertDir == "" {
		apiServer.CertDir = filepath.Join(dir, "apiserver")
	}
	if etcd.DataDir == "" {
		etcd.DataDir = filepath.Join(dir, "etcd")
	}
	if e.ControlPlaneStartTimeout == 0 && os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		e.ControlPlaneStartTimeout = ControlPlaneStartTimeout
	}
	if e.ControlPlaneStopTimeout == 0 && os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		e.ControlPlaneStopTimeout = ControlPlaneStopTimeout
	}
	if e.CRDInstallOptions.MaxTime == 0 {
		e.CRDInstallOptions.MaxTime = CRDInstallTimeout
	}
	return nil
}

func (e *Environment) assets() string {
	if e.BinaryAssetsDirectory != "" {
		return e.BinaryAssetsDirectory
	}
	return BinDir()
}

// StartAPIServerAgain starts the API server after a test stopped it (or killed it and then
// stopped it), with the same certificates, port and etcd.
func (e *Environment) StartAPIServerAgain() error {
	return deathsig.Do(e.ControlPlane.GetAPIServer().Start)
}

// Stop stops kube-apiserver and etcd and removes their files. It stops the processes even when
// envtest's own Stop gives up before them (it returns at the first error of its cleanup), and
// only once however often it is called.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		err := e.Environment.Stop()
		if err != nil {
			// Stopping a stopped process is a no-op, so this only stops what is still running.
			err = errors.Join(err, e.ControlPlane.Stop())
		}
		if e.dir != "" {
			err = errors.Join(err, os.RemoveAll(e.dir))
		}
		e.stopErr = err
	})
	return e.stopErr
}

// StartProcess starts cmd (a controller binary, a helper) so that, on Linux, it is killed when
// the test binary ends, even by SIGKILL or go test's -timeout: a test that dies never leaves
// it running against an API server that is gone.
func StartProcess(cmd *exec.Cmd) error {
	return deathsig.Start(cmd)
}
