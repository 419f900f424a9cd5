package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// shellBlock is a ```sh block of a document, indented or not.
var shellBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// sectionCommands returns the ```sh blocks of the section of doc (a path under the repository)
// headed by heading (a whole line, such as "## Install with Helm"), up to the next heading of
// the same level, each block as its lines with their indentation removed. It fails the test when
// the section or its blocks are gone, so that a test running them cannot pass on nothing.
func sectionCommands(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), doc))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(b, []byte("\n"+heading+"\n"))
	if start < 0 {
		t.Fatalf("%s has no section %q", doc, heading)
	}
	section := b[start+1:]
	level := heading[:strings.IndexByte(heading, ' ')+1] // "## "
	if end := bytes.Index(section[len(heading):], []byte("\n"+level)); end >= 0 {
		section = section[:len(heading)+end]
	}
	var blocks [][]string
	for _, m := range shellBlock.FindAllSubmatch(section, -1) {
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
			lines = append(lines, strings.TrimSpace(line))
		}
		blocks = append(blocks, lines)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s's section %q has no ```sh block", doc, heading)
	}
	return blocks
}

// docShell runs a document's command lines as a user would after downloading a release: in a
// directory whose dist/ is the release's directory, with the helm `make tools` built on PATH
// ahead of everything else (with a configuration of its own, as testenv.HelmCommand's) and
// KUBECONFIG naming the test's cluster. replace maps a placeholder of the document (such as
// X.Y.Z) to what it stands for in this release: the only change made to a line.
type docShell struct {
	dir, kubeconfig string
	env             []string
	replace         *strings.Replacer
}

func newDocShell(t *testing.T, dist, kubeconfig string, replace *strings.Replacer) *docShell {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(dist, filepath.Join(dir, "dist")); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, ".bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.Tool(t, "helm"), filepath.Join(bin, "helm")); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		testenv.Missing(t, "kubectl not found on PATH: the documents' commands use it")
	}
	home := t.TempDir()
	return &docShell{dir: dir, kubeconfig: kubeconfig, replace: replace, env: append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)}
}

// run runs each line with bash -euo pipefail and fails the test on the first that fails.
func (s *docShell) run(t *testing.T, ctx context.Context, lines []string) {
	t.Helper()
	for _, line := range lines {
		line = s.replace.Replace(line)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", line)
		cmd.Dir, cmd.Env = s.dir, s.env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("`%s` failed: %v\n%s", line, err, out)
		}
		t.Logf("$ %s\n%s", line, bytes.TrimSpace(out))
	}
}
