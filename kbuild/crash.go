package kbuild

import (
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomize runs krusty's build of dir, and turns a panic in kustomize into an error naming the
// step that crashed.
//
// A recover, as the last resort: the files a build reads are checked before kustomize reads them
// (checkYAML, checkRenderConfig), so that an object's metadata, labels or annotations written as
// a list never reach kyaml, whose accessors read a list there as a mapping's keys and values and
// panic (index out of range) when it has an odd length. But kustomize's patches can still make
// them lists (a JSON 6902 replace of /metadata with [a], a strategic merge patch written inline
// in a kustomization with annotations: [a]), and what a patch makes is known only by applying it
// as kustomize does. kustomize runs on the calling goroutine, and its result is dropped on a
// panic, so nothing half-built is used.
func kustomize(k *krusty.Kustomizer, fs filesys.FileSystem, dir string) (m resmap.ResMap, err error) {
	defer func() {
		if p := recover(); p != nil {
			m, err = nil, crashError(p, debug.Stack())
		}
	}()
	return k.Run(fs, dir)
}

// builtinStep and apiStep find, in a stack, the kustomize step that crashed: a builtin
// transformer or generator (PatchTransformer), else the innermost function of kustomize's.
var (
	builtinStep = regexp.MustCompile(`sigs\.k8s\.io/kustomize/api/internal/builtins\.\(\*(\w+)Plugin\)`)
	apiStep     = regexp.MustCompile(`sigs\.k8s\.io/kustomize/api/[\w/]*\.(\(\*?\w+\)\.)?(\w+)\(`)
)

// kyamlMapping tells kyaml's visit of a mapping's keys and values in a stack: it crashed on a
// list of odd length where it expected a mapping.
var kyamlMapping = regexp.MustCompile(`kustomize/kyaml/yaml\.visitFieldsWhileTrue`)

// crashError is kustomize's panic p, with its stack, as an error a person can act on.
func crashError(p any, stack []byte) error {
	where := "kustomize"
	if m := builtinStep.FindSubmatch(stack); m != nil {
		where = "kustomize's " + string(m[1])
	} else if m := apiStep.FindSubmatch(stack); m != nil {
		where = "kustomize (" + strings.NewReplacer("(", "", "*", "", ")", "").Replace(string(m[1])) + string(m[2]) + ")"
	}
	msg := fmt.Sprintf("%s crashed building this tree: %v", where, p)
	if kyamlMapping.Match(stack) {
		msg += "; kyaml crashes so on a list where it expects a mapping: a patch (or another transformer) of the tree, or of a base, makes an object's metadata, labels or annotations a list; they must be mappings"
	}
	return errors.New(msg)
}
