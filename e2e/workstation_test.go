package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// The workstation commands, as README.md (the router) and `sandbox-controller --help` (the
// controller) write them; ~/.kube/config stands for the user's kubeconfig.
const (
	routerCommand     = "go run ./cmd/sandbox-router --kubeconfig ~/.kube/config --listen 127.0.0.1:8080"
	controllerCommand = "sandbox-controller --kubeconfig ~/.kube/config --render-config render.yaml --enable-webhook=false"
)

// TestWorkstationCommands runs the controller and the router together on one machine, each with
// the command line its docs give, against a real API server with the CRDs: both start, neither
// takes a port the other wants (the controller's metrics once took the router's :8080), and
// both answer their probes. Only the kubeconfig and the render config's path are the test's. (It
// found the help's first workstation line, with the webhook on, never Ready: a workstation has
// no namespace for the webhook's certificate, and no Service reaches its webhook anyway.)
func TestWorkstationCommands(t *testing.T) {
	root := testenv.RepoRoot()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte(routerCommand)) {
		t.Fatalf("README.md no longer shows %q: update this test with it", routerCommand)
	}
	for _, addr := range []string{"127.0.0.1:8080", ":8081", ":9090", ":9443"} {
		if l, err := net.Listen("tcp", addr); err != nil {
			t.Skipf("port %s is taken on this machine by another program, so the documented commands cannot run here: %v", addr, err)
		} else {
			l.Close()
		}
	}
	cfg, _ := testenv.StartAPIServer(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/sandbox-controller", "./cmd/sandbox-router")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, err := exec.Command(filepath.Join(bin, "sandbox-controller"), "--help").Output()
	if err != nil || !bytes.Contains(help, []byte(controllerCommand)) {
		t.Fatalf("sandbox-controller --help no longer shows %q (%v): update this test with it", controllerCommand, err)
	}

	args := func(line string) []string {
		line = strings.ReplaceAll(line, "~/.kube/config", kubeconfig)
		line = strings.ReplaceAll(line, "render.yaml", filepath.Join(root, "docs", "example", "render.yaml"))
		return strings.Fields(line)
	}
	ctrlArgs := args(controllerCommand)[1:]
	routerArgs := args(routerCommand)[3:] // go run ./cmd/sandbox-router
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs [2]bytes.Buffer
	var exited [2]chan error
	for i, c := range []*exec.Cmd{
		exec.CommandContext(ctx, filepath.Join(bin, "sandbox-controller"), ctrlArgs...),
		exec.CommandContext(ctx, filepath.Join(bin, "sandbox-router"), routerArgs...),
	} {
		c.Stdout, c.Stderr = &logs[i], &logs[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited[i] = make(chan error, 1)
		go func() { exited[i] <- c.Wait() }()
	}
	names := [2]string{"sandbox-controller " + strings.Join(ctrlArgs, " "), "sandbox-router " + strings.Join(routerArgs, " ")}
	probe := func(url string) error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
	deadline := time.Now().Add(time.Minute)
	for {
		for i := range exited {
			select {
			case err := <-exited[i]:
				t.Fatalf("%s exited (%v) while the other runs:\n%s", names[i], err, logs[i].String())
			default:
			}
		}
		errC, errR := probe("http://127.0.0.1:8081/readyz"), probe("http://127.0.0.1:8080/readyz")
		if errC == nil && errR == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after a minute: controller %v, router %v\ncontroller:\n%s\nrouter:\n%s", errC, errR, logs[0].String(), logs[1].String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Both keep running together.
	time.Sleep(2 * time.Second)
	for i := range exited {
		select {
		case err := <-exited[i]:
			t.Fatalf("%s exited (%v):\n%s", names[i], err, logs[i].String())
		default:
		}
	}
}
