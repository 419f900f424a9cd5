package migrate

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGolden migrates testdata/<case>/input.yaml (checking claims against the pools of the same
// file) and compares the text with expected.yaml, and the findings with messages.txt. Cases named
// err-* must fail: then nothing is written and messages.txt holds why. Every successful output
// is migrated again and must come out unchanged.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			out, msgs, failed := migrateText(t, "input.yaml", in)
			wantFail := strings.HasPrefix(filepath.Base(dir), "err-")
			if failed != wantFail {
				t.Fatalf("failed = %v; cases named err-* must fail and only they\n%s", failed, msgs)
			}
			golden(t, filepath.Join(dir, "messages.txt"), msgs)
			if failed {
				return
			}
			golden(t, filepath.Join(dir, "expected.yaml"), string(out))

			again, _, failed := migrateText(t, "expected.yaml", out)
			if failed {
				t.Fatal("migrating the output again failed")
			}
			if diff := cmp.Diff(string(out), string(again)); diff != "" {
				t.Errorf("migrate is not idempotent (-first +second):\n%s", diff)
			}
		})
	}
}

func migrateText(t *testing.T, name string, data []byte) (out []byte, msgs string, failed bool) {
	t.Helper()
	f, err := Parse(name, data)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("parse error of type %T: %v", err, err)
		}
		return nil, err.Error() + "\n", true
	}
	pools := map[[2]string]string{}
	f.Pools(func(ns, n, tmpl string) { pools[[2]string{ns, n}] = tmpl })
	opts := Options{PoolTemplate: func(ns, n string) (string, bool) {
		tmpl, ok := pools[[2]string{ns, n}]
		return tmpl, ok
	}}
	out, res, err := f.Migrate(opts)
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Messages(name); len(m) > 0 {
		msgs = strings.Join(m, "\n") + "\n"
	}
	if res.Failed() {
		return nil, msgs, true
	}
	return out, msgs, false
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if got == "" {
			os.Remove(path)
			return
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
