// Package gitopshealth evaluates the project's GitOps health checks the way the tools do: the
// Argo CD Lua scripts (gitops/argocd/health) in gopher-lua as Argo CD's VM runs them, and the
// Flux healthCheckExprs (gitops/flux) in cel-go as Flux's StatusEvaluator runs them. The checks'
// own tests judge fixtures with it, and the real-node e2e judges live objects with it, so both
// use one evaluator.
package gitopshealth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ArgoCDStatus is what Argo CD reads from the table a health script returns.
type ArgoCDStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// The codes Argo CD accepts from a script (gitops-engine health.HealthStatusCode); anything else
// is shown as Unknown with InvalidHealthStatus.
var validStatuses = []string{"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}

// InvalidHealthStatus is Argo CD's message for a script that returns a status it does not know.
const InvalidHealthStatus = "Lua returned an invalid health status"

// ArgoCDScripts are the health scripts by kind, relative to the repository root.
var ArgoCDScripts = map[string]string{
	"Sandbox":         "gitops/argocd/health/sandbox.lua",
	"SandboxClaim":    "gitops/argocd/health/sandboxclaim.lua",
	"SandboxWarmPool": "gitops/argocd/health/sandboxwarmpool.lua",
}

// ArgoCD evaluates a health script the way Argo CD's util/lua VM does at v3
// (argoproj/argo-cd@37ee009): a state without the standard libraries except package, base and
// table (Argo CD adds a reduced os library that these scripts do not use, so leaving it out only
// makes the evaluation stricter), a one-second deadline, the object as the global obj, and the
// returned table read as {status, message}.
func ArgoCD(script string, obj map[string]any) (ArgoCDStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return ArgoCDStatus{}, fmt.Errorf("open %s library: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))

	if err := l.DoString(script); err != nil {
		return ArgoCDStatus{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return ArgoCDStatus{}, fmt.Errorf("script returned %s, want a table", l.Get(-1).Type())
	}
	var hs ArgoCDStatus
	for field, dst := range map[string]*string{"status": &hs.Status, "message": &hs.Message} {
		switch v := ret.RawGetString(field).(type) {
		case lua.LString:
			*dst = string(v)
		case *lua.LNilType:
		default:
			return ArgoCDStatus{}, fmt.Errorf("hs.%s is a %s, want a string", field, v.Type())
		}
	}
	if !slices.Contains(validStatuses, hs.Status) {
		return ArgoCDStatus{Status: "Unknown", Message: InvalidHealthStatus}, nil
	}
	return hs, nil
}

// ArgoCDOf evaluates the project's script for obj's kind, read from the repository at root.
func ArgoCDOf(root string, obj *unstructured.Unstructured) (ArgoCDStatus, error) {
	path, ok := ArgoCDScripts[obj.GetKind()]
	if !ok {
		return ArgoCDStatus{}, fmt.Errorf("no Argo CD health script for kind %q", obj.GetKind())
	}
	script, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return ArgoCDStatus{}, err
	}
	return ArgoCD(string(script), obj.Object)
}

// toLua converts an unstructured value as Argo CD's decodeValue does: integers and floats become
// numbers, lists become sequences (1-based, so ipairs works), maps become tables.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetH(lua.LString(key), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}
