package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nodeAnnotation marks the Nodes kwok manages (kwok runs with
// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake), so a Node registered some
// other way is left alone.
const nodeAnnotation = "kwok.x-k8s.io/node"

// NodeName is the name of the i-th fake Node.
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// createNodes registers n fake Nodes. They carry no taint, so any Pod may land on them, and the
// labels a kubelet on linux/amd64 would set; kwok fills in their status (Ready, addresses,
// capacity) and renews their leases.
func createNodes(ctx context.Context, cs kubernetes.Interface, n int) ([]string, error) {
	names := make([]string, n)
	for i := range n {
		names[i] = NodeName(i)
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        names[i],
				Annotations: map[string]string{nodeAnnotation: "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": names[i],
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
					"type":                   "kwok",
				},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating Node %s: %w", names[i], err)
		}
	}
	return names, nil
}

// nodesReady is nil once every named Node reports Ready=True.
func nodesReady(ctx context.Context, cs kubernetes.Interface, names []string) error {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	var notReady []string
	for _, name := range names {
		if !ready[name] {
			notReady = append(notReady, name)
		}
	}
	if len(notReady) > 0 {
		return fmt.Errorf("%d of %d Nodes not Ready (first: %s)", len(notReady), len(names), notReady[0])
	}
	return nil
}

// httpOK is nil when GET url answers 200. With cfg it speaks to the API server as cfg's user
// and checks its certificate; without, it is a health check of a component whose serving
// certificate is self-signed (loopback only, so there is no one to impersonate it).
func httpOK(ctx context.Context, url string, cfg *rest.Config) error {
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	if cfg != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(cfg.CAData)
		cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			return err
		}
		tlsConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
