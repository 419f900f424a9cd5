package krm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/fuzzseed"
)

// FuzzRun runs the function: never a panic; the same output twice; reading the list item by
// item, where it applies, agrees with reading it whole; its answer always a ResourceList; on an
// error the items come back as given; on success running it on its own output changes nothing.
func FuzzRun(f *testing.F) {
	for _, s := range fuzzseed.ResourceLists {
		f.Add([]byte(s))
	}
	for _, s := range fuzzseed.Repros {
		f.Add([]byte(fuzzseed.AsResourceList(s)))
	}
	for _, s := range fuzzseed.GoldenInputs() {
		f.Add([]byte(fuzzseed.AsResourceList(s)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Pools in fuzzed input are capped small so a run stays fast.
		if bytes.Contains(data, []byte("replicas")) && !bytes.Contains(data, []byte("maxPoolReplicas")) {
			data = capPools(data)
		}
		if diff := compareReadings(data); diff != "" {
			t.Fatalf("reading item by item differs from reading whole (-whole +item by item):\n%s", diff)
		}
		var out1, out2 bytes.Buffer
		err1 := Run(bytes.NewReader(data), &out1)
		err2 := Run(bytes.NewReader(data), &out2)
		if errText(err1) != errText(err2) || !bytes.Equal(out1.Bytes(), out2.Bytes()) {
			t.Fatalf("not deterministic:\n%v\n%v", err1, err2)
		}
		var results framework.Results
		if err1 != nil && !errors.As(err1, &results) {
			return // an I/O or encoding error, not an answer
		}
		docs, err := manifest.ReadNodes(out1.Bytes())
		if err != nil || len(docs) != 1 || !strings.Contains(out1.String(), "kind: ResourceList") {
			t.Fatalf("the answer is not one ResourceList (%v):\n%s", err, out1.String())
		}
		if err1 != nil {
			return
		}
		var out3 bytes.Buffer
		if err := Run(bytes.NewReader(out1.Bytes()), &out3); err != nil {
			t.Fatalf("running on its own output failed: %v\n%s", err, out1.String())
		}
		if !bytes.Equal(out1.Bytes(), out3.Bytes()) {
			t.Fatalf("running on its own output changed it:\n%s\n---- became\n%s", out1.String(), out3.String())
		}
	})
}

// capPools adds a functionConfig limiting pools, unless the input has one already.
func capPools(data []byte) []byte {
	if bytes.Contains(data, []byte("functionConfig")) {
		return data
	}
	return append(bytes.TrimRight(data, "\n"), []byte("\nfunctionConfig: {apiVersion: "+renderconfig.APIVersion+", kind: "+renderconfig.Kind+", spec: {maxPoolReplicas: 50}}\n")...)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
