// Package benchkit is what the controller's benchmarks measure with, on the API server's side and
// from /proc, so that every benchmark counts the same way: writes as the API server counted them
// (apiserver_request_total), a process's CPU time and resident set from the kernel, latencies as
// quantiles of what was seen. It holds no benchmark of its own.
package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Counts are API server requests by "resource[/subresource] VERB" (e.g. "sandboxes APPLY",
// "sandboxclaims/status PATCH").
type Counts map[string]float64

// writeVerbs are the verbs apiserver_request_total counts writes under.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// Writes reads apiserver_request_total from the API server's /metrics: its write requests by
// resource and verb, dry runs left out.
func Writes(ctx context.Context, cfg *rest.Config) (Counts, error) {
	body, err := metrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return ParseWrites(body), nil
}

// Reads is Writes for the reads: GET, LIST and WATCH requests by resource and verb.
func Reads(ctx context.Context, cfg *rest.Config) (Counts, error) {
	body, err := metrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return parseRequests(body, readVerbs, false), nil
}

// Requests is every request apiserver_request_total counted, by "resource[/subresource] VERB
// code": where the API server's time went, reads and the test's own included.
func Requests(ctx context.Context, cfg *rest.Config) (Counts, error) {
	body, err := metrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return parseRequests(body, nil, true), nil
}

func metrics(ctx context.Context, cfg *rest.Config) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	body, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	return body, nil
}

// readVerbs are the verbs apiserver_request_total counts reads under.
var readVerbs = map[string]bool{"GET": true, "LIST": true, "WATCH": true}

// ParseWrites reads the write requests of apiserver_request_total from a /metrics body.
func ParseWrites(body []byte) Counts { return parseRequests(body, writeVerbs, false) }

// parseRequests reads the requests of apiserver_request_total with one of verbs (nil: every
// verb), keyed with their response code too when byCode.
func parseRequests(body []byte, verbs map[string]bool, byCode bool) Counts {
	out := Counts{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "apiserver_request_total{")
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, "} ")
		if i < 0 {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:i], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		if (verbs != nil && !verbs[labels["verb"]]) || labels["dry_run"] != "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[i+2:]), 64)
		if err != nil {
			continue
		}
		res := labels["resource"]
		if labels["subresource"] != "" {
			res += "/" + labels["subresource"]
		}
		key := res + " " + labels["verb"]
		if byCode {
			key += " " + labels["code"]
		}
		out[key] += v
	}
	return out
}

// Since is what was counted between before and c, keeping only keys for which keep says so
// (all when keep is nil), and their sum.
func (c Counts) Since(before Counts, keep func(key string) bool) (Counts, float64) {
	out, total := Counts{}, 0.0
	for k, v := range c {
		if d := v - before[k]; d > 0 && (keep == nil || keep(k)) {
			out[k] = d
			total += d
		}
	}
	return out, total
}

// Process is a process's CPU time (user and system) and resident set, read from /proc.
type Process struct {
	CPU time.Duration
	// RSSMiB is the resident set now (VmRSS), PeakRSSMiB the highest it has been (VmHWM).
	RSSMiB, PeakRSSMiB float64
}

// ReadProcess reads pid's CPU time and resident set.
func ReadProcess(pid int) (Process, error) {
	var p Process
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		for prefix, into := range map[string]*float64{"VmRSS:": &p.RSSMiB, "VmHWM:": &p.PeakRSSMiB} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				*into = kb / 1024
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// The fields after the command name (in parentheses): utime is the 12th, stime the 13th, in
	// clock ticks (USER_HZ, 100 on Linux).
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return p, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	p.CPU = time.Duration((ut + st) / 100 * float64(time.Second))
	return p, nil
}

// CPU reads the CPU time of each named process (name → pid); a process that cannot be read is
// left out.
func CPU(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range pids {
		if p, err := ReadProcess(pid); err == nil {
			out[name] = p.CPU
		}
	}
	return out
}

// Quantile is the q-quantile (0 < q <= 1) of ds by the nearest-rank method: the smallest value
// at least q of them do not exceed. Zero for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(q*float64(len(s)) + 0.999999999)
	return s[min(max(rank, 1), len(s))-1]
}

// BuildController builds cmd/sandbox-controller of the module at root into dir and returns the
// binary's path: benchmarks run the controller as its own process, so that its CPU time and
// resident set are its own.
func BuildController(root, dir string) (string, error) {
	out := filepath.Join(dir, "sandbox-controller")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/sandbox-controller")
	cmd.Dir = root
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building sandbox-controller: %v\n%s", err, o)
	}
	return out, nil
}

// WriteKubeconfig writes cfg (a certificate user) as a kubeconfig file at path.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	return clientcmd.WriteToFile(*kc, path)
}
