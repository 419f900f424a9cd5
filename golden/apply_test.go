package golden

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandbox-gitops/sandbox-gitops/api/convert"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/goldencase"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestV1alpha1RendersApplyToOurCRDs: the rendered output of every golden case with v1alpha1
// input applies, with a server-side dry run, to this project's CRDs on a real kube-apiserver
// where no conversion webhook runs (a cluster without the controller: v1alpha1 is served only
// through the webhook). The same output with the sources kept as written must not apply, which
// shows the check can fail.
func TestV1alpha1RendersApplyToOurCRDs(t *testing.T) {
	cfg, _ := testenv.StartAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dirs, err := filepath.Glob("testdata/render/*")
	if err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]bool{"default": true}
	cases := 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		if strings.HasPrefix(name, "err-") {
			continue
		}
		objs := readInput(t, dir)
		alpha := false
		for _, o := range objs {
			alpha = alpha || convert.IsV1alpha1(o.GetAPIVersion())
		}
		if !alpha {
			continue
		}
		cc, err := goldencase.ReadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		cases++
		t.Run(name, func(t *testing.T) {
			apply := func(keep bool) (applied int, failures []string) {
				cc := cc
				cc.KeepSourceVersions = keep
				out, err := expandFunc(cc)(deepCopy(objs))
				if err != nil {
					t.Fatal(err)
				}
				rendered, err := manifest.Parse("output", out)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range rendered {
					if ns := o.GetNamespace(); ns != "" && !namespaces[ns] {
						if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
							t.Fatal(err)
						}
						namespaces[ns] = true
					}
					err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll,
						client.FieldOwner("sandbox-render-golden"), client.ForceOwnership)
					if err != nil {
						failures = append(failures, o.GetAPIVersion()+" "+o.GetKind()+" "+o.GetName()+": "+err.Error())
						continue
					}
					applied++
				}
				return applied, failures
			}
			applied, failures := apply(cc.KeepSourceVersions)
			if cc.KeepSourceVersions {
				if len(failures) == 0 {
					t.Errorf("the v1alpha1 sources kept as written applied with no conversion webhook running")
				}
				return
			}
			for _, f := range failures {
				t.Errorf("does not apply: %s", f)
			}
			if applied == 0 {
				t.Error("nothing applied")
			}
			if _, failures := apply(true); len(failures) == 0 {
				t.Errorf("with the sources kept as v1alpha1 everything applied too: the check cannot fail")
			}
		})
	}
	if cases < 7 {
		t.Errorf("only %d golden cases with v1alpha1 input; expected at least 7", cases)
	}
}
