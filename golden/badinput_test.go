package golden

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestBadInput runs every file of testdata/bad-input through the sandbox-render binary and
// compares the exit code, stderr (and, for the function, stdout) with <file>.want, so a message
// change is reviewed like code. A file named fn-*.yaml is a ResourceList for `sandbox-render fn`
// on standard input; any other is passed to `sandbox-render render` by name. A failed render
// must write nothing on standard output. -update rewrites the .want files.
func TestBadInput(t *testing.T) {
	bin := testenv.SandboxRender(t)
	dir := filepath.Join("testdata", "bad-input")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("only %d bad inputs; the corpus holds every repro of issue 12", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			fn := strings.HasPrefix(name, "fn-")
			args := []string{"render", name}
			var stdin []byte
			if fn {
				args = []string{"fn"}
				if stdin, err = os.ReadFile(f); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			cmd.Stdin = bytes.NewReader(stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			code := 0
			if err := cmd.Run(); err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatal(err)
				}
				code = ee.ExitCode()
			}
			if code == 0 {
				t.Errorf("exit 0 on bad input; stdout:\n%s", stdout.String())
			}
			if !fn && stdout.Len() > 0 {
				t.Errorf("a failed render wrote to standard output:\n%s", stdout.String())
			}
			if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "%!") {
				t.Errorf("a crash or a formatting artefact on stderr:\n%s", stderr.String())
			}
			got := fmt.Sprintf("$ sandbox-render %s\nexit %d\n--- stderr\n%s", strings.Join(args, " "), code, stderr.String())
			if fn {
				got += "--- stdout\n" + stdout.String()
			}
			wantFile := strings.TrimSuffix(f, ".yaml") + ".want"
			if *update {
				writeFile(t, wantFile, []byte(got))
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("no %s (run with -update): %v", wantFile, err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
