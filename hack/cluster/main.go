// Command cluster starts and stops the local cluster of `make cluster` and `make cluster-down`:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with fake Nodes, on
// loopback, from the binaries `make tools` builds. See internal/cluster.
//
// Usage:
//
//	go run ./hack/cluster up [-dir .cluster] [-bin bin] [-nodes 1] [-scale] [-real-node]
//	go run ./hack/cluster down [-dir .cluster]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: cluster up [-dir DIR] [-bin DIR] [-nodes N] [-scale] [-real-node] | cluster down [-dir DIR]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("cluster "+os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".cluster", "state directory: kubeconfig, pki/, etcd/, logs/, pids/")
	bin := fs.String("bin", "bin", "directory of the binaries `make tools` builds")
	nodes := fs.Int("nodes", 1, "number of fake Nodes")
	scale := fs.Bool("scale", false, "run the components with the limits of upstream's kwok scalability test (no client rate limits, 2,000 requests in flight)")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long the start may take")
	images := fs.String("images", "", "with -real-node: image tarballs to import into the node, comma-separated (dist/images/*.tar, as `make images` writes them)")
	realNode := fs.Bool("real-node", false, "add one real node (containerd, kubelet, kube-proxy, CNI bridge, CoreDNS, local-path provisioner) in a network namespace of its own; -nodes then counts fake Nodes beside it (needs root)")
	_ = fs.Parse(os.Args[2:])

	if os.Args[1] == "down" {
		running := cluster.Running(*dir)
		if err := cluster.Down(*dir); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			os.Exit(1)
		}
		if len(running) == 0 {
			fmt.Printf("cluster: nothing from %s was running\n", *dir)
		} else {
			fmt.Printf("cluster: stopped %s\n", strings.Join(running, ", "))
		}
		return
	}

	// A ^C during the start stops what has started; after it, the components run on their own.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	fakeNodes := *nodes
	if *realNode && !flagSet(fs, "nodes") {
		fakeNodes = 0
	}
	c, err := cluster.Start(ctx, cluster.Options{BinDir: *bin, Dir: *dir, Nodes: fakeNodes, Detach: true, Timeout: *timeout, Scale: *scale, RealNode: *realNode, Images: splitList(*images)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	rel := func(p string) string {
		if wd, err := os.Getwd(); err == nil {
			if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
				return r
			}
		}
		return p
	}
	kind := "fake Node(s)"
	if *realNode {
		kind = "Node(s), " + cluster.RealNodeName + " real"
	}
	fmt.Printf("cluster: up in %.1fs at %s with %d %s, all Ready; logs in %s\n",
		time.Since(start).Seconds(), c.Config.Host, len(c.Nodes), kind, rel(filepath.Join(c.Dir, "logs")))
	fmt.Printf("export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Println("cluster: `make cluster-down` stops it")
}

// flagSet reports whether the command line set the flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
