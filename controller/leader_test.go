package controller_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestLeaderElection: two replicas of the controller binary with --leader-elect, as
// config/default deploys it. Only the leader reconciles (each replica's own
// controller_runtime_reconcile_total says so); when it stops, the other takes over and
// reconciles what comes next.
func TestLeaderElection(t *testing.T) {
	ns := newNamespace(t)
	bin := buildController(t)
	kubeconfig := writeKubeconfig(t, asController)
	a, b := startReplica(t, bin, kubeconfig, ns), startReplica(t, bin, kubeconfig, ns)

	leader, follower := a, b
	eventually(t, time.Minute, "a leader", func() error {
		switch {
		case a.leading() && b.leading():
			return fmt.Errorf("both replicas lead")
		case a.leading():
			return nil
		case b.leading():
			leader, follower = b, a
			return nil
		}
		return fmt.Errorf("no replica leads yet")
	})

	create(t, sandbox(ns, "first"))
	waitReady(t, ns, "first", metav1.ConditionTrue, "DependenciesReady")
	if n := leader.reconciles(); n == 0 {
		t.Errorf("the leader reconciled nothing")
	}
	if n := follower.reconciles(); n != 0 || follower.leading() {
		t.Errorf("the follower reconciled %v times (leading: %v) while the other led", n, follower.leading())
	}

	leader.stop(t)
	eventually(t, time.Minute, "the follower taking over", func() error {
		if !follower.leading() {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	create(t, sandbox(ns, "second"))
	waitReady(t, ns, "second", metav1.ConditionTrue, "DependenciesReady")
	if n := follower.reconciles(); n == 0 {
		t.Errorf("the new leader reconciled nothing")
	}
}

// replica is one controller process.
type replica struct {
	cmd     *exec.Cmd
	metrics string
	exited  chan error
}

func startReplica(t *testing.T, bin, kubeconfig, ns string) *replica {
	t.Helper()
	r := &replica{metrics: freeAddr(t), exited: make(chan error, 1)}
	r.cmd = exec.Command(bin, "--kubeconfig", kubeconfig, "--namespaces", ns,
		"--leader-elect", "--leader-election-namespace", "sandbox-gitops-system",
		"--metrics-bind-address", r.metrics, "--health-probe-bind-address", "0", "--enable-webhook=false", "--zap-log-level", "error")
	r.cmd.Stderr = os.Stderr
	if err := testenv.StartProcess(r.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
		r.exited <- nil
	})
	return r
}

// stop sends SIGTERM and requires a clean exit.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.exited:
		if err != nil {
			t.Errorf("the stopped replica: %v", err)
		}
		r.exited <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("the replica did not stop within 30s of SIGTERM")
	}
}

func (r *replica) leading() bool {
	return r.metric(`leader_election_master_status{name="sandbox-gitops-controller"}`) == 1
}

// reconciles is how many Sandbox passes this replica ran.
func (r *replica) reconciles() float64 {
	total := 0.0
	for _, result := range []string{"success", "error", "requeue", "requeue_after"} {
		total += r.metric(`controller_runtime_reconcile_total{controller="sandbox",result="` + result + `"}`)
	}
	return total
}

// metric is the value of one series of the replica's /metrics, 0 if absent or unreachable.
func (r *replica) metric(series string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metrics+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
