package cluster

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
)

// The real node's network, all of it inside the node's own network namespace except the host end
// of the one veth pair that joins them, as kind's node container is joined to its host. The node
// namespace has no default route: a packet for any address the cluster does not own is dropped
// there, so nothing the node or a Pod sends can leave the machine.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "real-node"
	// hostLink is the host end of the veth pair; the node end is eth0 in the node's namespace.
	// There is one real node per machine at a time: a second Start finds the link and refuses.
	hostLink = "sgn-host"
	// linkCIDR is the pair's /30: the host end (where the API server listens) and the node end.
	hostIP, nodeIP, linkPrefix = "10.213.213.1", "10.213.213.2", 30
	// clusterDNSIP is the Service address of the cluster's CoreDNS (kube-system/kube-dns).
	clusterDNSIP = "10.96.0.10"
	// clusterDomain is the only zone CoreDNS serves: it forwards nothing.
	clusterDomain = "cluster.local"
	// pauseImage is the sandbox image containerd gives every Pod, built from ./pause.
	pauseImage = "sandbox-gitops.local/pause:v1"
)

// nodePaths are the node's directories under the cluster's state directory.
type nodePaths struct {
	root string // <dir>/node
}

func (n nodePaths) containerdRoot() string  { return filepath.Join(n.root, "containerd", "root") }
func (n nodePaths) containerdState() string { return filepath.Join(n.root, "containerd", "state") }
func (n nodePaths) containerdSock() string {
	return filepath.Join(n.root, "containerd", "containerd.sock")
}
func (n nodePaths) containerdConf() string { return filepath.Join(n.root, "containerd", "config.toml") }
func (n nodePaths) registryHosts() string  { return filepath.Join(n.root, "containerd", "certs.d") }
func (n nodePaths) cniConf() string        { return filepath.Join(n.root, "cni", "net.d") }
func (n nodePaths) cniData() string        { return filepath.Join(n.root, "cni", "ipam") }
func (n nodePaths) kubeletRoot() string    { return filepath.Join(n.root, "kubelet") }
func (n nodePaths) kubeletConf() string    { return filepath.Join(n.root, "kubelet.yaml") }
func (n nodePaths) kubeProxyConf() string  { return filepath.Join(n.root, "kube-proxy.yaml") }
func (n nodePaths) images() string         { return filepath.Join(n.root, "images") }
func (n nodePaths) localPath() string      { return filepath.Join(n.root, "local-path") }

// containerdConfig is containerd's configuration: everything under the node's directory, runc
// under cgroupfs (the machine's cgroups are v1, and containerd 1.6 does not tell kubelet its
// driver), the CNI plugins from Debian's package, Pod network namespaces under the state
// directory (so that `ip netns` on the host never lists them), and every registry answered by a
// loopback port nobody listens on, so that a pull fails at once instead of leaving the machine.
func containerdConfig(p nodePaths, cniBinDir string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, p.containerdRoot(), p.containerdState(), p.containerdSock(), pauseImage, cniBinDir, p.cniConf(), p.registryHosts())
}

// registryHostsDefault sends every registry to a loopback port nobody listens on.
const registryHostsDefault = `server = "http://127.0.0.1:1"
[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
`

// cniConfig is the Pod network: a bridge with host-local addresses from the node's Pod CIDR and
// portmap for hostPorts. No masquerade: nothing the Pods reach is outside the cluster.
func cniConfig(p nodePaths, nodePodCIDR string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "sandbox-gitops",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, p.cniData(), nodePodCIDR)
}

// kubeletConfig is the kubelet's configuration. What each setting is for:
//   - failCgroupV1 false and cgroupfs: this machine's cgroups are v1;
//   - failSwapOn false: the machine may have swap, and nothing here measures memory pressure;
//   - eviction and image GC thresholds that never trigger on a shared developer disk, so that a
//     test's images and Pods are not evicted by what else the disk holds;
//   - resolvConf empty: Pods get the cluster's DNS and nothing of the host's resolvers;
//   - serializeImagePulls false and no registry: every image is imported before it is used.
func kubeletConfig(p nodePaths, pkiDir, nodePodCIDR string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
clusterDomain: %s
clusterDNS: [%s]
resolvConf: ""
failSwapOn: false
podCIDR: %s
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 4s
nodeStatusReportFrequency: 10s
rotateCertificates: false
serverTLSBootstrap: false
protectKernelDefaults: false
`, p.containerdSock(), nodeIP, filepath.Join(pkiDir, "kubelet.crt"), filepath.Join(pkiDir, "kubelet.key"),
		filepath.Join(pkiDir, "ca.crt"), clusterDomain, clusterDNSIP, nodePodCIDR)
}

// kubeProxyConfig runs kube-proxy's iptables mode in the node's namespace and leaves every
// conntrack sysctl alone (0): those are global to the machine, not to the node.
func kubeProxyConfig(kubeconfig, podCIDR string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`, kubeconfig, RealNodeName, nodeIP, podCIDR)
}

// kernelTunables are the machine-wide sysctls kubelet sets at start (setupKernelTunables): they
// are read before the node starts and written back when it stops.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// mustIP parses one of the constants above.
func mustIP(s string) net.IP {
	ip := net.ParseIP(s)
	if ip == nil {
		panic("cluster: bad address constant " + s)
	}
	return ip
}

// sysctlPath is the /proc/sys file of a tunable.
func sysctlPath(name string) string { return "/proc/sys/" + strings.TrimPrefix(name, "/") }
