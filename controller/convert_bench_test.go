package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
)

// convertAsEnvtest installs the CRDs' conversion as envtest does by default, strategy None, for
// the rest of a benchmark, and puts the suite's back when it ends.
//
// The suite points conversion at a port where nothing listens, so that v1alpha1 requests fail
// as they do in a cluster without the webhook. The API server keeps a watch cache per served
// version and decodes every write into each: with an unreachable webhook, each write to one of
// these kinds costs a failed conversion call and a restarted v1alpha1 watch, work neither a
// cluster (whose webhook answers) nor upstream's measurement (envtest's default) has. At 1,000
// Sandboxes it cost 3.5 s of API-server CPU and 2.6 s to Ready.
func convertAsEnvtest(b *testing.B) {
	b.Helper()
	c := crdClient(b)
	ctx := context.Background()
	crds, err := crd.All()
	if err != nil {
		b.Fatal(err)
	}
	for _, want := range crds {
		setConversion(b, c, want.Name, &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter})
	}
	b.Cleanup(func() {
		for _, want := range crds {
			setConversion(b, c, want.Name, suiteConversion[want.Name])
		}
	})
	// The API server rebuilds a CRD's storage after the change: wait until a v1alpha1 read of
	// an existing object of every kind is converted (it fails while the webhook is in use).
	ns := newNamespace(b)
	probes := []client.Object{template(ns, "probe"), warmPool(ns, "probe", "probe", 0), sandboxClaim(ns, "probe", "probe"), sandbox(ns, "probe")}
	for _, p := range probes {
		create(b, p)
	}
	eventually(b, time.Minute, "v1alpha1 reads converted without the webhook", func() error {
		for _, p := range probes {
			gvk, err := apiutil.GVKForObject(p, scheme)
			if err != nil {
				return err
			}
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(gvk.Group + "/v1alpha1")
			u.SetKind(gvk.Kind)
			if err := admin.Get(ctx, client.ObjectKeyFromObject(p), u); err != nil {
				return fmt.Errorf("%s: %w", gvk.Kind, err)
			}
		}
		return nil
	})
}

// suiteConversion is each CRD's conversion as the suite installed it (envtest rewrote the
// webhook's address), kept by setConversion the first time it changes one.
var suiteConversion = map[string]*apiextensionsv1.CustomResourceConversion{}

func setConversion(b *testing.B, c client.Client, name string, conv *apiextensionsv1.CustomResourceConversion) {
	b.Helper()
	eventually(b, time.Minute, "CRD "+name+" conversion updated", func() error {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
			return err
		}
		if _, kept := suiteConversion[name]; !kept {
			suiteConversion[name] = live.Spec.Conversion.DeepCopy()
		}
		live.Spec.Conversion = conv.DeepCopy()
		return c.Update(context.Background(), live)
	})
}

func crdClient(b *testing.B) client.Client {
	b.Helper()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	return c
}
