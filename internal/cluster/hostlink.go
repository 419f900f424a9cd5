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

// HostLink is an address on this machine that is neither loopback nor the machine's own
// interface: the host end of a veth pair whose other end lives in a network namespace of its
// own. The API server may call a webhook there (an EndpointSlice may not hold a loopback
// address), and no packet sent to it leaves the machine or touches its external interface. The
// namespace is held by a process that dies with the caller, so the pair goes even if the caller
// is killed.
type HostLink struct {
	// IP is the host end's address.
	IP     net.IP
	holder *exec.Cmd
	name   string
}

// hostLinkName and hostLinkCIDR are the pair's host end and its /30; the real node's pair is
// 10.213.213.0/30, this one the next.
const hostLinkName, hostLinkIP = "sgw-host", "10.213.214.1"

// NewHostLink makes the pair; it needs root. Close removes it.
func NewHostLink(ctx context.Context) (*HostLink, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a host link needs root: it makes a network namespace and a veth pair")
	}
	if _, err := os.Stat("/sys/class/net/" + hostLinkName); err == nil {
		return nil, fmt.Errorf("interface %s exists: another test's host link is up", hostLinkName)
	}
	holder := exec.Command("unshare", "--net", "--", "sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("starting the host link's namespace: %w", err)
	}
	l := &HostLink{IP: net.ParseIP(hostLinkIP), holder: holder, name: hostLinkName}
	pid := strconv.Itoa(holder.Process.Pid)
	if err := waitOwnNetns(holder.Process.Pid); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("the host link: %w", err)
	}
	steps := [][]string{
		{"ip", "link", "add", hostLinkName, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"ip", "addr", "add", hostLinkIP + "/30", "dev", hostLinkName},
		{"ip", "link", "set", hostLinkName, "up"},
		{"nsenter", "-t", pid, "-n", "--", "ip", "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return l, nil
}

// Close kills the namespace's holder and waits until the pair is gone with the namespace.
func (l *HostLink) Close() error {
	_ = l.holder.Process.Kill()
	_ = l.holder.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/sys/class/net/" + l.name); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("interface %s still exists 10 s after its namespace's holder died", l.name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
