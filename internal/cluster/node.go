package cluster

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The real node is one process tree, as kind's node container is: `unshare` makes a PID, mount
// and network namespace whose PID 1 is ./pause, and containerd, kubelet and kube-proxy are
// started into those namespaces with nsenter. Everything the node makes lives in them: the
// containers (in nested namespaces), the overlay and volume mounts, the Pods' network
// namespaces (under containerd's state directory), every iptables rule, the bridge and the veth
// ends. When PID 1 dies the kernel kills every process in the PID namespace, and with the last
// process the mount and network namespaces go, taking the veth pair and the host routes through
// it. PID 1 dies with unshare (--kill-child), and unshare with the launcher (Pdeathsig), so a
// test killed with SIGKILL leaves no node behind. What the node changes outside its namespaces
// is restored by stopNode: the kubepods cgroups and the kernel tunables kubelet writes.

// nodeTools are the host programs the node needs, from Debian's packages (make tools installs
// them): containerd and its ctr, runc, util-linux's unshare and nsenter, iproute2, iptables.
var nodeTools = []string{"containerd", "ctr", "runc", "unshare", "nsenter", "ip", "iptables", "mount"}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// cniPlugins are the plugins the node's network uses.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// busyboxPath is Debian's busybox-static: the shell of the volume provisioner's helper Pods.
const busyboxPath = "/bin/busybox"

// nodePreflight says what the node needs and the machine lacks, in one error.
func nodePreflight(binDir string) error {
	var missing []string
	for _, t := range nodeTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p))
		}
	}
	if _, err := os.Stat(busyboxPath); err != nil {
		missing = append(missing, busyboxPath)
	}
	for _, b := range NodeBinaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			missing = append(missing, filepath.Join(binDir, b))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node needs %s; `make tools` installs containerd, runc, the CNI plugins and busybox-static with apt-get and builds the rest",
			strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return errors.New("the real node needs root: it makes namespaces, a veth pair and cgroups")
	}
	if _, err := os.Stat("/sys/class/net/" + hostLink); err == nil {
		return fmt.Errorf("interface %s exists: another real node runs on this machine (make cluster-down stops the one `make cluster` started)", hostLink)
	}
	return nil
}

// node is the running real node.
type node struct {
	paths   nodePaths
	initPID int // PID 1 of the node's namespaces, as the host sees it
}

// startNodeNamespaces makes the node's namespaces and network: PID 1, the veth pair, the
// addresses, the host's routes to the Service and Pod ranges through the node, and the node's
// private /run, /var/lib and /var/log. It runs before the API server, which listens on the host
// end of the pair.
func (c *Cluster) startNodeNamespaces(ctx context.Context) error {
	n := &node{paths: nodePaths{root: filepath.Join(c.Dir, "node")}}
	c.node = n
	for _, d := range []string{n.paths.root, n.paths.cniConf(), n.paths.cniData(), filepath.Join(n.paths.registryHosts(), "_default"),
		n.paths.kubeletRoot(), n.paths.images(), n.paths.localPath(), n.paths.containerdState()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := saveTunables(filepath.Join(c.Dir, "pids", "tunables")); err != nil {
		return err
	}
	pause := filepath.Join(n.paths.root, "pause")
	if err := goBuild(ctx, pause, "github.com/sandbox-gitops/sandbox-gitops/internal/cluster/pause"); err != nil {
		return err
	}
	err := c.spawn("node", "unshare", []string{"--pid", "--fork", "--kill-child=SIGKILL", "--mount", "--net",
		"--mount-proc", "--propagation", "private", "--", pause}, nil)
	if err != nil {
		return err
	}
	if err := c.poll(ctx, "the node's PID 1", func() error {
		pid, err := onlyChild(c.PIDs()["node"])
		n.initPID = pid
		return err
	}); err != nil {
		return err
	}
	in := n.initPID
	pid := strconv.Itoa(in)
	steps := [][]string{
		{"ip", "link", "add", hostLink, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"ip", "addr", "add", fmt.Sprintf("%s/%d", hostIP, linkPrefix), "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
		n.enter("-n", "ip", "link", "set", "lo", "up"),
		n.enter("-n", "ip", "addr", "add", fmt.Sprintf("%s/%d", nodeIP, linkPrefix), "dev", "eth0"),
		n.enter("-n", "ip", "link", "set", "eth0", "up"),
		// Per network namespace: the node routes between its Pods and the host end, and bridged
		// Pod traffic passes iptables, which kube-proxy's Service NAT needs.
		n.enter("-n -m", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables"),
		{"ip", "route", "add", serviceCIDR, "via", nodeIP, "dev", hostLink},
		{"ip", "route", "add", c.podCIDR(), "via", nodeIP, "dev", hostLink},
		n.enter("-m", "sh", "-c", "mount -t tmpfs -o mode=0755 node-run /run && mount -t tmpfs -o mode=0755 node-var-lib /var/lib && mount -t tmpfs -o mode=0755 node-var-log /var/log"),
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("setting up the node: %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// enter is a command run in the node's namespaces: flags say which (-n network, -m mount, -p PID).
func (n *node) enter(flags string, cmd ...string) []string {
	args := []string{"nsenter", "-t", strconv.Itoa(n.initPID)}
	for _, f := range strings.Split(flags, " ") {
		args = append(args, f)
	}
	return append(append(args, "--"), cmd...)
}

// spawnInNode starts a component in all of the node's namespaces.
func (c *Cluster) spawnInNode(name, bin string, args ...string) error {
	all := c.node.enter("-p -m -n", append([]string{bin}, args...)...)
	return c.spawn(name, all[0], all[1:], nil)
}

// startContainerd writes containerd's and the CNI's configuration, starts containerd in the node
// and waits until it answers.
func (c *Cluster) startContainerd(ctx context.Context) error {
	p := c.node.paths
	files := map[string]string{
		p.containerdConf(): containerdConfig(p, cniBinDir),
		filepath.Join(p.registryHosts(), "_default", "hosts.toml"): registryHostsDefault,
		filepath.Join(p.cniConf(), "10-sandbox-gitops.conflist"):   cniConfig(p, c.mustNodePodCIDR()),
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return err
		}
	}
	containerd, _ := exec.LookPath("containerd")
	if err := c.spawnInNode("containerd", containerd, "--config", p.containerdConf()); err != nil {
		return err
	}
	return c.poll(ctx, "containerd", func() error {
		_, err := c.ctr(ctx, "version")
		return err
	})
}

// ctr runs containerd's own client against the node's containerd, in the namespace of the CRI.
func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	all := append([]string{"--address", c.node.paths.containerdSock(), "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, "ctr", all...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// ImportImage imports an image tarball (an OCI layout with its index.json naming the image, as
// `make images` and ociimage write them) into the real node's containerd, so that a Pod can run
// it without a pull. The image is also named repository@digest: a pull records that name, an
// import does not, and the CRI finds an image a manifest pins by digest only by it.
func (c *Cluster) ImportImage(ctx context.Context, tarball string) error {
	if c.node == nil {
		return errors.New("this cluster has no real node")
	}
	refs, err := tarballRefs(tarball)
	if err != nil {
		return err
	}
	if _, err := c.ctr(ctx, "images", "import", "--all-platforms", tarball); err != nil {
		return err
	}
	for ref, digest := range refs {
		repo := ref
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			repo = ref[:i]
		}
		if _, err := c.ctr(ctx, "images", "tag", "--force", ref, repo+"@"+digest); err != nil {
			return err
		}
	}
	return nil
}

// tarballRefs reads the names and digests an image tarball's index.json gives its images.
func tarballRefs(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: no index.json: %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&idx); err != nil {
			return nil, fmt.Errorf("%s: index.json: %w", path, err)
		}
		refs := map[string]string{}
		for _, m := range idx.Manifests {
			if name := m.Annotations["io.containerd.image.name"]; name != "" {
				refs[name] = m.Digest
			}
		}
		if len(refs) == 0 {
			return nil, fmt.Errorf("%s: index.json names no image (io.containerd.image.name)", path)
		}
		return refs, nil
	}
}

// startKubelet writes kubelet's and kube-proxy's configurations and credentials and starts both
// in the node.
func (c *Cluster) startKubeletAndProxy(p *pki) error {
	np := c.node.paths
	if _, err := p.serving("kubelet", mustIP(nodeIP)); err != nil {
		return err
	}
	creds := []struct{ file, user, group string }{
		{"kubelet.kubeconfig", "system:node:" + RealNodeName, "system:nodes"},
		{"kube-proxy.kubeconfig", "system:kube-proxy", ""},
	}
	for _, id := range creds {
		var groups []string
		if id.group != "" {
			groups = []string{id.group}
		}
		kp, err := p.client(strings.TrimSuffix(id.file, ".kubeconfig"), id.user, groups...)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(c.Dir, id.file), c.Config.Host, p.caPEM, kp); err != nil {
			return err
		}
	}
	if err := os.WriteFile(np.kubeletConf(), []byte(kubeletConfig(np, p.dir, c.mustNodePodCIDR())), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(np.kubeProxyConf(), []byte(kubeProxyConfig(filepath.Join(c.Dir, "kube-proxy.kubeconfig"), c.podCIDR())), 0o644); err != nil {
		return err
	}
	err := c.spawnInNode("kubelet", c.bin("kubelet"),
		"--config="+np.kubeletConf(),
		"--kubeconfig="+filepath.Join(c.Dir, "kubelet.kubeconfig"),
		"--hostname-override="+RealNodeName,
		"--node-ip="+nodeIP,
		"--root-dir="+np.kubeletRoot(),
		"--v=1",
	)
	if err != nil {
		return err
	}
	return c.spawnInNode("kube-proxy", c.bin("kube-proxy"), "--config="+np.kubeProxyConf(), "--v=1")
}

// onlyChild is the one child of pid (unshare's: the node's PID 1).
func onlyChild(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 1 {
		return 0, fmt.Errorf("unshare (pid %d) has %d children", pid, len(f))
	}
	return strconv.Atoi(f[0])
}

// goBuild builds a main package of this module for this machine.
func goBuild(ctx context.Context, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// saveTunables records the kernel tunables kubelet will write, once: a second start must not
// record the values an earlier node left.
func saveTunables(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	var b strings.Builder
	for _, t := range kernelTunables {
		v, err := os.ReadFile(sysctlPath(t))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s %s\n", t, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// restoreTunables writes back what saveTunables recorded, then forgets it.
func restoreTunables(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if err := os.WriteFile(sysctlPath(name), []byte(value), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(path))
	}
	return errors.Join(errs...)
}

// kubepodsCgroups are the cgroups kubelet makes (cgroupRoot /, cgroupfs): one per v1 hierarchy.
func kubepodsCgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	return dirs
}

// removeCgroups removes the kubepods cgroups once every process in them is gone, deepest first.
func removeCgroups(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		last = nil
		for _, root := range kubepodsCgroups() {
			var dirs []string
			_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
					last = err
				}
			}
		}
		if last == nil || time.Now().After(deadline) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopNode undoes what the node changed outside its namespaces, once its processes are gone:
// the kubepods cgroups and the kernel tunables; and waits until the host end of the veth pair is
// gone with the node's network namespace.
func stopNode(dir string) error {
	var errs []error
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/sys/class/net/" + hostLink); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("interface %s still exists 10 s after the node stopped", hostLink))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := removeCgroups(10 * time.Second); err != nil {
		errs = append(errs, fmt.Errorf("removing the kubepods cgroups: %w", err))
	}
	if err := restoreTunables(filepath.Join(dir, "pids", "tunables")); err != nil {
		errs = append(errs, fmt.Errorf("restoring kernel tunables: %w", err))
	}
	return errors.Join(errs...)
}

// startRealNode brings the node up once the control plane runs: its images, kubelet and
// kube-proxy, then the cluster's DNS and volume provisioner, and returns when the Node is Ready
// and both add-ons are available.
func (c *Cluster) startRealNode(ctx context.Context, p *pki, cs kubernetes.Interface, images []string) error {
	if err := c.importNodeImages(ctx); err != nil {
		return err
	}
	for _, img := range images {
		if err := c.ImportImage(ctx, img); err != nil {
			return err
		}
	}
	if err := c.startKubeletAndProxy(p); err != nil {
		return err
	}
	if err := c.poll(ctx, "Node "+RealNodeName+" Ready", func() error { return nodesReady(ctx, cs, []string{RealNodeName}) }); err != nil {
		return err
	}
	d, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.poll(ctx, "kube-router's RBAC applied", func() error { return apply(ctx, d, cs.Discovery(), kubeRouterRBAC) }); err != nil {
		return err
	}
	if err := c.startKubeRouter(p); err != nil {
		return err
	}
	for _, m := range []string{coreDNSManifest(), localPathManifest(c.node.paths.localPath())} {
		if err := c.poll(ctx, "the add-ons applied", func() error { return apply(ctx, d, cs.Discovery(), m) }); err != nil {
			return err
		}
	}
	for _, dep := range [][2]string{{"kube-system", "coredns"}, {"local-path-storage", "local-path-provisioner"}} {
		if err := c.poll(ctx, "Deployment "+dep[0]+"/"+dep[1]+" available", func() error {
			return deploymentAvailable(ctx, cs, dep[0], dep[1])
		}); err != nil {
			return err
		}
	}
	return nil
}

// deploymentAvailable is nil once a Deployment has all its replicas updated and available.
func deploymentAvailable(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < want || d.Status.UpdatedReplicas < want {
		return fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, want)
	}
	return nil
}

// InNode runs a command in the real node's network and mount namespaces (its routes, its
// iptables rules, its files) and returns its combined output.
func (c *Cluster) InNode(ctx context.Context, cmd ...string) ([]byte, error) {
	if c.node == nil {
		return nil, errors.New("this cluster has no real node")
	}
	args := c.node.enter("-n -m", cmd...)
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s in the node: %v: %s", strings.Join(cmd, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// startKubeRouter starts kube-router's firewall alone (no routing, no service proxy, no CNI) in
// the node: it enforces every NetworkPolicy with iptables and ipset in the node's namespace, the
// dataplane the secure default is proven on. kube-proxy stays the service proxy.
func (c *Cluster) startKubeRouter(p *pki) error {
	kp, err := p.client("kube-router", "system:kube-router")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.Dir, "kube-router.kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.Config.Host, p.caPEM, kp); err != nil {
		return err
	}
	return c.spawnInNode("kube-router", c.bin("kube-router"),
		"--kubeconfig="+kubeconfig,
		"--hostname-override="+RealNodeName,
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--run-loadbalancer=false",
		"--enable-cni=false",
		"--enable-ipv4=true",
		"--enable-ipv6=false",
		"--service-cluster-ip-range="+serviceCIDR,
		"--health-port=0",
		"--metrics-port=0",
		"--iptables-sync-period=1m",
		"--v=1",
	)
}

// mustNodePodCIDR is nodePodCIDR, which Start has checked.
func (c *Cluster) mustNodePodCIDR() string {
	cidr, err := c.nodePodCIDR()
	if err != nil {
		panic(err)
	}
	return cidr
}
