package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// inPod asks the test server in a Pod, reached by port-forward (API server, kubelet, the
// container runtime, then the Pod's own loopback, which no NetworkPolicy filters), to do
// something from inside the Pod's network namespace, and decodes its JSON answer into out.
func inPod(ctx context.Context, k *kube, ns, pod, path string, query url.Values, out any) error {
	transport, upgrader, err := spdy.RoundTripperFor(k.cfg)
	if err != nil {
		return err
	}
	u := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + sandboxPort}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return fmt.Errorf("port-forward to %s/%s: %v", ns, pod, err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("port-forward to %s/%s not ready within 30 s", ns, pod)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		return fmt.Errorf("port-forward to %s/%s: ports %v (%v)", ns, pod, ports, err)
	}
	reqCtx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	target := "http://127.0.0.1:" + strconv.Itoa(int(ports[0].Local)) + path + "?" + query.Encode()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s in %s/%s: %d %s", path, ns, pod, resp.StatusCode, body)
	}
	if s, ok := out.(*string); ok {
		*s = string(body)
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return errors.Join(fmt.Errorf("%s in %s/%s: %s", path, ns, pod, body), err)
	}
	return nil
}
