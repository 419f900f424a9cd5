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
			code, stdout, stderr := runBinary(t, bin, dir, args, stdin)
			if code == 0 {
				t.Errorf("exit 0 on bad input; stdout:\n%s", stdout)
			}
			if !fn && stdout != "" {
				t.Errorf("a failed render wrote to standard output:\n%s", stdout)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "%!") {
				t.Errorf("a crash or a formatting artefact on stderr:\n%s", stderr)
			}
			got := fmt.Sprintf("$ sandbox-render %s\nexit %d\n--- stderr\n%s", strings.Join(args, " "), code, stderr)
			if fn {
				got += "--- stdout\n" + stdout
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

// TestBadInputEveryMode runs every directory of testdata/bad-input, a kustomization with its
// files, through render, validate and build, and compares their answers with <directory>.want.
// The three read the same bytes and must give the same verdict, with the same exit code: build
// once dropped a document after "..." that render kept, and refused a render.yaml render took
// (issue 37). The function reads a ResourceList, not files: its cases are the fn-*.yaml files.
func TestBadInputEveryMode(t *testing.T) {
	bin := testenv.SandboxRender(t)
	dir := filepath.Join("testdata", "bad-input")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			var got strings.Builder
			codes := map[int]bool{}
			for _, mode := range []string{"render", "validate", "build"} {
				args := []string{mode, name}
				code, stdout, stderr := runBinary(t, bin, dir, args, nil)
				codes[code] = true
				if code == 0 {
					t.Errorf("%s: exit 0 on bad input", mode)
				}
				if stdout != "" {
					t.Errorf("a failed %s wrote to standard output:\n%s", mode, stdout)
				}
				if strings.Contains(stderr, "panic") || strings.Contains(stderr, "%!") {
					t.Errorf("%s: a crash or a formatting artefact on stderr:\n%s", mode, stderr)
				}
				fmt.Fprintf(&got, "$ sandbox-render %s\nexit %d\n--- stderr\n%s", strings.Join(args, " "), code, stderr)
			}
			if len(codes) != 1 {
				t.Errorf("the modes disagree on the exit code")
			}
			wantFile := filepath.Join(dir, name+".want")
			if *update {
				writeFile(t, wantFile, []byte(got.String()))
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("no %s (run with -update): %v", wantFile, err)
			}
			if diff := cmp.Diff(string(want), got.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// runBinary runs sandbox-render in dir with args and stdin, and returns its exit code and output.
func runBinary(t *testing.T, bin, dir string, args []string, stdin []byte) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errOut.String()
}
