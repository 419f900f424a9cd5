package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
)

const (
	pausedSandbox = "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata:\n  name: %s\nspec:\n  replicas: 0 # paused\n  podTemplate:\n    spec:\n      containers:\n      - name: c\n        image: busybox\n"
	notYAML       = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: tab\n"
)

// fileState is what a file is, for checking that a failed migration left it alone: a rewrite
// with the same bytes still changes the modification time.
type fileState struct {
	Data    string
	Mode    fs.FileMode
	ModTime time.Time
}

// fileStates are the states of every file below dir (hidden ones included, so a temporary file
// left behind shows), by path relative to dir.
func fileStates(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fileState{string(b), info.Mode(), info.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeFiles writes files (relative path to content) below dir with mode 0640 and a
// modification time in the past, so that any rewrite shows in it.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}
}

func chmodReadOnly(t *testing.T, dir string) {
	t.Helper()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	checkReadOnly(t, dir)
}

// checkReadOnly skips the test if dir is writable after all.
func checkReadOnly(t *testing.T, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "probe-*")
	if err == nil {
		f.Close()
		os.Remove(f.Name())
		t.Skipf("%s is still writable after making it read-only", dir)
	}
}

// TestMigrateAllOrNothing migrates a.yaml and d/b.yaml, given in that order, so that a problem
// with the second file comes after the first could have been written: then no file changes, not
// even its modification time, and no temporary file is left. A success leaves exactly the two
// files, migrated, with their permissions.
func TestMigrateAllOrNothing(t *testing.T) {
	cases := map[string]struct {
		reason     string
		second     string
		readOnly   bool
		wantCode   int
		wantStderr []string
	}{
		"second file does not parse": {
			reason:     "every file is parsed and converted before anything is written",
			second:     notYAML,
			wantCode:   cli.ExitFailure,
			wantStderr: []string{"b.yaml: document 1, line 4:", "not valid YAML; no file was changed"},
		},
		"second directory is read-only": {
			reason:   "every new content is staged beside its file before the first rename",
			second:   strings.ReplaceAll(pausedSandbox, "%s", "b"),
			readOnly: true,
			wantCode: cli.ExitUsage,
			// The cause is "read-only file system" under a bind mount, "permission denied" under chmod.
			wantStderr: []string{"sandbox-render: writing {d}/b.yaml: creating a temporary file in {d}: ", "; nothing was changed\n"},
		},
		"both written": {
			reason:   "a success leaves the migrated files and nothing else",
			second:   strings.ReplaceAll(pausedSandbox, "%s", "b"),
			wantCode: cli.ExitOK,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"a.yaml":   strings.ReplaceAll(pausedSandbox, "%s", "a"),
				"d/b.yaml": tc.second,
			})
			d := filepath.Join(dir, "d")
			if tc.readOnly {
				readOnlyDir(t, d)
			}
			before := fileStates(t, dir)

			code, _, stderr := runCLI(t, "migrate", filepath.Join(dir, "a.yaml"), filepath.Join(d, "b.yaml"))
			if code != tc.wantCode {
				t.Errorf("%s: exit %d, want %d\n%s", tc.reason, code, tc.wantCode, stderr)
			}
			for _, w := range tc.wantStderr {
				if w = strings.ReplaceAll(w, "{d}", d); !strings.Contains(stderr, w) {
					t.Errorf("%s: stderr does not contain %q:\n%s", tc.reason, w, stderr)
				}
			}
			after := fileStates(t, dir)
			if tc.wantCode != cli.ExitOK {
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("%s: files changed (-want +got):\n%s", tc.reason, diff)
				}
				return
			}
			want := map[string]fileState{}
			for name, s := range before {
				s.Data = strings.Replace(strings.Replace(s.Data, "v1alpha1", "v1beta1", 1), "replicas: 0 # paused", "operatingMode: Suspended # paused", 1)
				want[name] = s
			}
			// The modification times are new; everything else is as wanted.
			if diff := cmp.Diff(want, after, cmp.Comparer(func(a, b time.Time) bool { return true })); diff != "" {
				t.Errorf("%s: files after migrate (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReplaceAllRenameFails: a rename failing after others succeeded puts the old content back
// into the files already replaced, or says which it could not.
func TestReplaceAllRenameFails(t *testing.T) {
	cases := map[string]struct {
		reason string
		// failFrom is the first call of rename that fails; every later one fails too when
		// failAfter is set.
		failFrom  int
		failAfter bool
		want      map[string]string
		wantErr   []string
	}{
		"first rename fails": {
			reason:   "nothing was renamed, so there is nothing to restore",
			failFrom: 1,
			want:     map[string]string{"a.yaml": "old a\n", "d/b.yaml": "old b\n"},
			wantErr:  []string{"writing {dir}/a.yaml: moving the new content into place: injected; nothing was changed"},
		},
		"second rename fails": {
			reason:   "a.yaml is replaced, then restored from the content kept in memory",
			failFrom: 2,
			want:     map[string]string{"a.yaml": "old a\n", "d/b.yaml": "old b\n"},
			wantErr:  []string{"writing {dir}/d/b.yaml: moving the new content into place: injected; {dir}/a.yaml got its old content back: no file's content was changed"},
		},
		"restoring fails too": {
			reason:    "a.yaml stays migrated, and the message says so",
			failFrom:  2,
			failAfter: true,
			want:      map[string]string{"a.yaml": "new a\n", "d/b.yaml": "old b\n"},
			wantErr:   []string{"writing {dir}/d/b.yaml: moving the new content into place: injected; could not put the old content back into {dir}/a.yaml (injected): that file is migrated, every other file is as it was"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"a.yaml": "old a\n", "d/b.yaml": "old b\n"})
			calls := 0
			rename := func(oldpath, newpath string) error {
				calls++
				if calls == tc.failFrom || (tc.failAfter && calls > tc.failFrom) {
					return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: errors.New("injected")}
				}
				return os.Rename(oldpath, newpath)
			}
			err := replaceAll([]replacement{
				{name: filepath.Join(dir, "a.yaml"), old: []byte("old a\n"), new: []byte("new a\n")},
				{name: filepath.Join(dir, "d/b.yaml"), old: []byte("old b\n"), new: []byte("new b\n")},
			}, rename)
			if err == nil {
				t.Fatalf("%s: no error", tc.reason)
			}
			for _, w := range tc.wantErr {
				if w = strings.ReplaceAll(w, "{dir}", dir); !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error\n%v\ndoes not contain\n%s", tc.reason, err, w)
				}
			}
			got := map[string]string{}
			for name, s := range fileStates(t, dir) {
				got[name] = s.Data
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: files (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
