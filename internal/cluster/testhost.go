package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TestHost is a host outside the cluster that only the real node can reach: a program running in
// a network namespace of its own, joined to the node's namespace by a veth pair. The node routes
// each of its addresses' subnets to it, and it routes only the Pod range back, so a Pod's packet
// for one of its addresses goes to it and nowhere else, and nothing it sends leaves the node. The
// namespace is held by the program itself (unshare --net), which dies with the caller: the pair
// goes with it even if the caller is killed.
type TestHost struct {
	// Addrs are its addresses.
	Addrs []net.IP
	cmd   *exec.Cmd
	done  chan struct{}
}

// StartTestHost runs bin with args and env in a new network namespace joined to the real node;
// cidrs are its addresses with their prefix (198.51.100.10/24): the node end of the pair takes the
// first other address of each subnet. name names the node end (at most 15 bytes).
func (c *Cluster) StartTestHost(ctx context.Context, name string, cidrs []string, env []string, bin string, args ...string) (*TestHost, error) {
	if c.node == nil {
		return nil, errors.New("this cluster has no real node")
	}
	if len(name) > 15 || name == "" {
		return nil, fmt.Errorf("test host %q: an interface name has 1 to 15 bytes", name)
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--", bin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting test host %s: %w", name, err)
	}
	h := &TestHost{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(h.done) }()
	pid := strconv.Itoa(cmd.Process.Pid)
	if err := waitOwnNetns(cmd.Process.Pid); err != nil {
		_ = h.Stop()
		return nil, fmt.Errorf("test host %s: %w", name, err)
	}
	node := strconv.Itoa(c.node.initPID)
	steps := [][]string{
		{"ip", "link", "add", name, "netns", node, "type", "veth", "peer", "name", "eth0", "netns", pid},
		c.node.enter("-n", "ip", "link", "set", name, "up"),
		{"nsenter", "-t", pid, "-n", "--", "ip", "link", "set", "lo", "up"},
		{"nsenter", "-t", pid, "-n", "--", "ip", "link", "set", "eth0", "up"},
	}
	for _, cidr := range cidrs {
		ip, subnet, err := net.ParseCIDR(cidr)
		if err != nil || ip.To4() == nil {
			_ = h.Stop()
			return nil, fmt.Errorf("test host %s: address %q: want an IPv4 CIDR", name, cidr)
		}
		h.Addrs = append(h.Addrs, ip)
		gw := nextIP(subnet.IP)
		if gw.Equal(ip) {
			gw = nextIP(gw)
		}
		ones, _ := subnet.Mask.Size()
		steps = append(steps,
			c.node.enter("-n", "ip", "addr", "add", fmt.Sprintf("%s/%d", gw, ones), "dev", name),
			[]string{"nsenter", "-t", pid, "-n", "--", "ip", "addr", "add", cidr, "dev", "eth0"},
		)
		if len(h.Addrs) == 1 {
			steps = append(steps, []string{"nsenter", "-t", pid, "-n", "--", "ip", "route", "add", c.podCIDR(), "via", gw.String()})
		}
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			_ = h.Stop()
			return nil, fmt.Errorf("test host %s: %s: %v: %s", name, strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return h, nil
}

// Stop kills the test host's program; its namespace and the pair go with it.
func (h *TestHost) Stop() error {
	_ = h.cmd.Process.Kill()
	select {
	case <-h.done:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("the test host did not exit within 10 s of SIGKILL")
	}
}

// nextIP is ip + 1.
func nextIP(ip net.IP) net.IP {
	out := append(net.IP(nil), ip.To4()...)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]++
		if out[i] != 0 {
			break
		}
	}
	return out
}

// waitOwnNetns waits until the process pid, started as `unshare --net -- ...`, is in a network
// namespace other than the caller's: unshare makes it, then execs the program.
func waitOwnNetns(pid int) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		self, _ := os.Readlink("/proc/self/ns/net")
		its, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err == nil && its != self {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("its network namespace did not appear within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
