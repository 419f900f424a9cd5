// Package cluster runs a real local Kubernetes control plane without Docker: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok, from the binaries `make tools`
// builds, all on loopback. kwok simulates the kubelets of fake Nodes, so Pods get scheduled,
// become Running and Ready with an IP, and are deleted as on a real node, while the controller
// manager's controllers (Deployments, ReplicaSets, EndpointSlices, the garbage collector,
// namespaces, ServiceAccount tokens) do what they do in a cluster. That is what envtest, which
// runs only the API server and etcd, cannot show.
//
// A test starts one in-process (Start, then Stop; the children die with the test binary even if
// it is killed); `make cluster` starts one detached (Options.Detach) and `make cluster-down`
// stops it from its pid files (Down).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Binaries are the programs a cluster runs, all built by `make tools` into one directory, with
// kwok's default stages in kwok-stages/ beside them.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// KwokStagesDir is the directory beside the binaries that holds kwok's default stages.
const KwokStagesDir = "kwok-stages"

const (
	// serviceCIDR is the range of Service cluster IPs; the API server's own Service gets its first
	// address.
	serviceCIDR = "10.96.0.0/16"
	// defaultPodCIDR is where Pods take their IPs from (kwok's and the real node's); /16 leaves
	// room for the scale benchmark.
	defaultPodCIDR = "10.244.0.0/16"
)

// Options say how to start a cluster.
type Options struct {
	// BinDir holds Binaries and KwokStagesDir (./bin after `make tools`).
	BinDir string
	// Dir is the state directory: pki/, etcd/, the kubeconfigs, logs/<component>.log and
	// pids/<component>.pid. It is created if needed; a previous cluster's state in it is replaced.
	Dir string
	// Nodes is how many fake Nodes to create (kwok-node-0, ...); 0 means 1.
	Nodes int
	// Detach leaves the components running after the launcher exits (each in a session of its
	// own), to be stopped with Down. Without it they die with the launcher.
	Detach bool
	// Timeout bounds the start; 0 means 3 minutes.
	Timeout time.Duration
	// Scale runs the components with the limits of upstream agent-sandbox's kwok scalability
	// test (kwokctl --disable-qps-limits, with its kube-apiserver in-flight caps): kube-apiserver
	// at 2,000 requests and 1,000 mutating requests in flight without API Priority and Fairness,
	// kube-controller-manager and kube-scheduler at 5,000 requests a second (burst 10,000), so that
	// what a benchmark measures is the API server and the controller under test, not the client
	// rate limits of the cluster's own components.
	Scale bool
	// RealNode adds one real node, RealNodeName: containerd and runc, kubelet and kube-proxy in a
	// network namespace of its own joined to the host by a veth pair, a CNI bridge, CoreDNS for
	// the cluster domain and rancher's local-path provisioner as the default StorageClass. It
	// needs root and the Debian packages `make tools` installs. The API server then listens on
	// the host end of the pair instead of loopback, and Nodes counts the fake Nodes beside it
	// (0 means none).
	RealNode bool
	// Images are image tarballs (OCI layouts, as `make images` writes them) imported into the
	// real node before Start returns.
	Images []string
	// PodCIDR is the cluster's Pod range, a /16 (default 10.244.0.0/16); the real node takes
	// its first /24. The dataplane test runs a node whose Pods have CGNAT addresses
	// (100.64.0.0/16), as some clouds give them.
	PodCIDR string
	// KwokStages are kwok Stage files loaded after kwok's default ones (KwokStagesDir). Where a
	// stage of weight above 0 and a default one (weight 0) select the same object, kwok always
	// takes the weighted one, so a stage file can change what the fake kubelet does for some
	// Pods only: `make e2e-upstream` has Pods whose only container runs `sh -c "exit 0"`
	// succeed, as a kubelet would run them.
	KwokStages []string
}

// Cluster is a running cluster.
type Cluster struct {
	// Dir is the state directory.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig (user kubernetes-admin in system:masters).
	Kubeconfig string
	// Config is the same admin identity as a rest.Config.
	Config *rest.Config
	// Nodes are the names of the fake Nodes, all Ready when Start returns.
	Nodes []string

	binDir   string
	detached bool
	scale    bool
	procs    []*process
	ports    map[string]int
	node     *node    // the real node, when Options.RealNode
	pods     string   // Options.PodCIDR
	stages   []string // Options.KwokStages
}

// MissingBinaries lists what Start needs from binDir and is not there.
func MissingBinaries(binDir string) []string {
	var missing []string
	for _, name := range append(Binaries, KwokStagesDir) {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

// Start starts a cluster and returns once the API server is ready, every Node is Ready, the
// controller manager and the scheduler answer their health checks and the default
// ServiceAccount exists (Pods cannot be created before it does). On any failure, or when ctx
// ends first, it stops whatever it started and says which component failed, with the end of its
// log.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	dir, err := prepare(&opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	c = &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), binDir: opts.BinDir, detached: opts.Detach, scale: opts.Scale, ports: map[string]int{}, pods: opts.PodCIDR, stages: opts.KwokStages}
	if _, err := c.nodePodCIDR(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
			c = nil
		}
	}()
	for _, name := range []string{"etcd-client", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if c.ports[name], err = freePort(); err != nil {
			return c, err
		}
	}

	p, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return c, err
	}
	serviceIP := net.IPv4(10, 96, 0, 1)
	if _, err = p.serving("apiserver", serviceIP, mustIP(hostIP)); err != nil {
		return c, err
	}
	if err = p.serviceAccountKeys(); err != nil {
		return c, err
	}
	if err = c.writeKubeconfigs(p, opts.RealNode); err != nil {
		return c, err
	}
	if err = c.startComponents(ctx, p, opts); err != nil {
		return c, err
	}
	return c, nil
}

// prepare checks what a start needs (the binaries, a real node's host, no cluster of dir still
// running), fills in the defaults of opts and makes its directories afresh, returning the
// cluster's directory as an absolute path.
func prepare(opts *Options) (string, error) {
	if missing := MissingBinaries(opts.BinDir); len(missing) > 0 {
		return "", fmt.Errorf("%s not found in %s; run `make tools` to build them from Go modules",
			strings.Join(missing, ", "), opts.BinDir)
	}
	if opts.RealNode {
		if err := nodePreflight(opts.BinDir); err != nil {
			return "", err
		}
	} else if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Minute
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return "", err
	}
	if opts.BinDir, err = filepath.Abs(opts.BinDir); err != nil {
		return "", err
	}
	if running := Running(dir); len(running) > 0 {
		return "", fmt.Errorf("a cluster from %s is still running (%s); stop it first (make cluster-down)",
			dir, strings.Join(running, ", "))
	}
	for _, old := range []string{"pki", "etcd", "pids", "kwok", "node"} {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return "", err
		}
	}
	for _, sub := range []string{"logs", "pids", "kwok"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// writeKubeconfigs makes the client certificates of the admin, the controller manager and the
// scheduler and writes their kubeconfigs into the cluster's directory; the admin's is c.Config.
func (c *Cluster) writeKubeconfigs(p *pki, realNode bool) error {
	host := "https://" + net.JoinHostPort(c.apiServerIP(realNode), strconv.Itoa(c.ports["kube-apiserver"]))
	identities := []struct{ file, user, group string }{
		{"kubeconfig", "kubernetes-admin", "system:masters"},
		{"kube-controller-manager.kubeconfig", "system:kube-controller-manager", ""},
		{"kube-scheduler.kubeconfig", "system:kube-scheduler", ""},
	}
	for _, id := range identities {
		var groups []string
		if id.group != "" {
			groups = []string{id.group}
		}
		kp, err := p.client(strings.TrimSuffix(id.file, ".kubeconfig"), id.user, groups...)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(c.Dir, id.file), host, p.caPEM, kp); err != nil {
			return err
		}
		if id.file == "kubeconfig" {
			c.Config = &rest.Config{
				Host:            host,
				TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM, CertData: kp.cert, KeyData: kp.key},
				QPS:             100,
				Burst:           200,
			}
		}
	}

	return nil
}

// startComponents starts the components in order (a real node's namespaces and containerd, etcd,
// the API server, the controllers, the Nodes) and waits until the cluster is usable.
func (c *Cluster) startComponents(ctx context.Context, p *pki, opts Options) (err error) {
	if opts.RealNode {
		// The API server listens on the host end of the node's veth pair: the pair comes first.
		if err = c.startNodeNamespaces(ctx); err != nil {
			return err
		}
		if err = c.startContainerd(ctx); err != nil {
			return err
		}
	}
	if err = c.startEtcd(ctx); err != nil {
		return err
	}
	if err = c.startAPIServer(ctx, p); err != nil {
		return err
	}
	if err = c.startControllers(p, opts.Nodes > 0); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if c.Nodes, err = createNodes(ctx, cs, opts.Nodes); err != nil {
		return err
	}
	if opts.RealNode {
		if err = c.startRealNode(ctx, p, cs, opts.Images); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, RealNodeName)
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if err = c.waitHealthy(ctx, name); err != nil {
			return err
		}
	}
	if err = c.poll(ctx, "every Node Ready", func() error { return nodesReady(ctx, cs, c.Nodes) }); err != nil {
		return err
	}
	if err = c.poll(ctx, "ServiceAccount default/default", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	return nil
}

// Stop stops every component, clients of the API server first, and waits until each has exited.
// It is safe to call on a nil Cluster and more than once.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	if c.node == nil {
		return c.stopProcesses()
	}
	return errors.Join(c.stopProcesses(), stopNode(c.Dir))
}

// PIDs are the process ids of the components, by name.
func (c *Cluster) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range c.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client := "http://127.0.0.1:" + strconv.Itoa(c.ports["etcd-client"])
	peer := "http://127.0.0.1:" + strconv.Itoa(c.ports["etcd-peer"])
	err := c.spawn("etcd", c.bin("etcd"), []string{
		"--name=local",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		// Nothing here needs to survive a power cut, and fsync is most of etcd's latency.
		"--unsafe-no-fsync",
	}, nil)
	if err != nil {
		return err
	}
	return c.poll(ctx, "etcd healthy", func() error { return httpOK(ctx, client+"/health", nil) })
}

// apiServerIP is where the API server listens: loopback, or with a real node the host end of
// the node's veth pair, which the node, its Pods (through Service default/kubernetes) and the
// host all reach.
func (c *Cluster) apiServerIP(realNode bool) string {
	if realNode {
		return hostIP
	}
	return "127.0.0.1"
}

func (c *Cluster) startAPIServer(ctx context.Context, p *pki) error {
	real := c.node != nil
	ip := c.apiServerIP(real)
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(c.ports["etcd-client"]),
		"--bind-address=" + ip,
		"--advertise-address=" + ip,
		"--secure-port=" + strconv.Itoa(c.ports["kube-apiserver"]),
		"--cert-dir=" + p.dir,
		"--tls-cert-file=" + p.path("apiserver.crt"),
		"--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.path("sa.pub"),
		"--service-account-signing-key-file=" + p.path("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
	}
	if real {
		// Webhooks are called at their Service's cluster IP, which the host routes to the node,
		// where kube-proxy sends it on to a Pod: the path a real cluster takes. Logs, exec and
		// port-forward reach the kubelet as a cluster admin.
		args = append(args, "--enable-aggregator-routing=false",
			// On SIGTERM the API server drains its in-flight requests for up to this long; at
			// the default of 60 s, a stop after a test of the real node waited out the whole
			// 15 s stopTimeout and was killed. Nothing here asks for more than a few seconds.
			"--request-timeout=10s",
			"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
			"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP")
		if _, err := p.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"); err != nil {
			return err
		}
	} else {
		args = append(args,
			// The reconciler would publish the advertise address as the endpoint of Service
			// default/kubernetes, and endpoints may not be loopback; no Pod here runs a real client.
			"--endpoint-reconciler-type=none",
			// Webhooks and aggregated APIs are called at an endpoint of their Service, as a
			// cluster's DNS and kube-proxy would route them, rather than at its cluster IP, which
			// nothing here routes (there is no kube-proxy). A process on this machine can then serve
			// a Service's webhook through an EndpointSlice naming the machine's address (e2e).
			"--enable-aggregator-routing=true")
	}
	err := c.spawn("kube-apiserver", c.bin("kube-apiserver"), append(args, c.scaleArgs("kube-apiserver")...), nil)
	if err != nil {
		return err
	}
	return c.poll(ctx, "kube-apiserver ready", func() error {
		return httpOK(ctx, c.Config.Host+"/readyz", c.Config)
	})
}

func (c *Cluster) startControllers(p *pki, kwok bool) error {
	kcm := filepath.Join(c.Dir, "kube-controller-manager.kubeconfig")
	err := c.spawn("kube-controller-manager", c.bin("kube-controller-manager"), append([]string{
		"--kubeconfig=" + kcm,
		"--authentication-kubeconfig=" + kcm,
		"--authorization-kubeconfig=" + kcm,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports["kube-controller-manager"]),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "kube-controller-manager"),
		"--leader-elect=false",
		// Every controller that is on by default: deployment, replicaset, endpointslice,
		// garbage collector, namespace, serviceaccount and its tokens, node lifecycle, ...
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.path("sa.key"),
		"--root-ca-file=" + p.path("ca.crt"),
		"--cluster-signing-cert-file=" + p.path("ca.crt"),
		"--cluster-signing-key-file=" + p.path("ca.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
	}, c.scaleArgs("kube-controller-manager")...), nil)
	if err != nil {
		return err
	}
	sched := filepath.Join(c.Dir, "kube-scheduler.kubeconfig")
	err = c.spawn("kube-scheduler", c.bin("kube-scheduler"), append([]string{
		"--kubeconfig=" + sched,
		"--authentication-kubeconfig=" + sched,
		"--authorization-kubeconfig=" + sched,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports["kube-scheduler"]),
		"--leader-elect=false",
	}, c.scaleArgs("kube-scheduler")...), nil)
	if err != nil {
		return err
	}
	if !kwok {
		return nil
	}
	stages, err := filepath.Glob(filepath.Join(c.binDir, KwokStagesDir, "*.yaml"))
	if err != nil || len(stages) == 0 {
		return fmt.Errorf("no kwok stages in %s; run `make tools`", filepath.Join(c.binDir, KwokStagesDir))
	}
	for _, s := range c.stages {
		abs, err := filepath.Abs(s)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("kwok stage file: %w", err)
		}
		stages = append(stages, abs)
	}
	return c.spawn("kwok", c.bin("kwok"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--config=" + strings.Join(stages, ","),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + nodeAnnotation + "=fake",
		"--cidr=" + c.podCIDR(),
		"--node-ip=127.0.0.1",
		"--node-lease-duration-seconds=40",
	}, []string{
		// kwok reads ~/.kwok/kwok.yaml when it exists; keep a user's kwok setup out of this one.
		"KWOK_WORKDIR=" + filepath.Join(c.Dir, "kwok"),
	})
}

// scaleArgs are a component's flags under Options.Scale (none otherwise).
func (c *Cluster) scaleArgs(component string) []string {
	if !c.scale {
		return nil
	}
	switch component {
	case "kube-apiserver":
		return []string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000", "--enable-priority-and-fairness=false"}
	case "kube-controller-manager", "kube-scheduler":
		return []string{"--kube-api-qps=5000", "--kube-api-burst=10000"}
	}
	return nil
}

// waitHealthy waits for a component's /healthz on its secure port (open to anyone by default).
func (c *Cluster) waitHealthy(ctx context.Context, name string) error {
	url := "https://127.0.0.1:" + strconv.Itoa(c.ports[name]) + "/healthz"
	return c.poll(ctx, name+" healthy", func() error { return httpOK(ctx, url, nil) })
}

// poll calls cond every 100 ms until it returns nil, a component exits, or ctx ends.
func (c *Cluster) poll(ctx context.Context, what string, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if exited := c.exited(); exited != nil {
			return fmt.Errorf("waiting for %s: %w", what, exited)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v); logs are in %s", what, ctx.Err(), err, filepath.Join(c.Dir, "logs"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// bin is the path of one of the Binaries.
func (c *Cluster) bin(name string) string { return filepath.Join(c.binDir, name) }

func writeKubeconfig(path, host string, ca []byte, kp keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos["local"] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.cert, ClientKeyData: kp.key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

// freePort is a loopback port nobody listens on at the moment.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// podCIDR is the cluster's Pod range.
func (c *Cluster) podCIDR() string {
	if c.pods == "" {
		return defaultPodCIDR
	}
	return c.pods
}

// nodePodCIDR is the real node's share of the Pod range: its first /24.
func (c *Cluster) nodePodCIDR() (string, error) {
	ip, n, err := net.ParseCIDR(c.podCIDR())
	if err != nil || ip.To4() == nil {
		return "", fmt.Errorf("PodCIDR %q: want an IPv4 CIDR", c.podCIDR())
	}
	if ones, _ := n.Mask.Size(); ones > 24 {
		return "", fmt.Errorf("PodCIDR %q: want a range of at least a /24", c.podCIDR())
	}
	return (&net.IPNet{IP: n.IP, Mask: net.CIDRMask(24, 32)}).String(), nil
}
