package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// ruleLine is a Makefile rule's first line: a target name, a colon, and not an assignment.
var ruleLine = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):($|[^=])`)

// TestMakeHelpListsEveryTarget runs `make help` as a newcomer would and holds it to the
// Makefile's rules: a target the help leaves out is one nobody finds (issue 36 found e2e missing,
// since the help's pattern had no digits), and a .PHONY name with no rule is a target that is not
// there.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	root := testenv.RepoRoot()
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, m := range ruleLine.FindAllStringSubmatch(string(makefile), -1) {
		rules = append(rules, m[1])
	}
	slices.Sort(rules)

	makeBin, err := exec.LookPath("make")
	if err != nil {
		testenv.Missing(t, "make not found (%v); the README's commands are make targets", err)
	}
	cmd := exec.Command(makeBin, "--no-print-directory", "help")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	var listed []string
	for line := range strings.Lines(string(out)) {
		if fields := strings.Fields(line); len(fields) > 1 {
			listed = append(listed, fields[0])
		}
	}
	slices.Sort(listed)
	if diff := cmp.Diff(rules, listed); diff != "" {
		t.Errorf("make help lists other targets than the Makefile's rules (-rules +listed):\n%s", diff)
	}

	var phony []string
	for line := range strings.Lines(string(makefile)) {
		if rest, ok := strings.CutPrefix(line, ".PHONY:"); ok {
			phony = append(phony, strings.Fields(rest)...)
		}
	}
	for _, name := range phony {
		if _, found := slices.BinarySearch(rules, name); !found {
			t.Errorf(".PHONY names %s, which has no rule", name)
		}
	}
}
