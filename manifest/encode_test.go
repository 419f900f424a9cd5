package manifest

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAppendYAMLMatchesGoYAML: the fast encoder writes what go-yaml writes, byte for byte, or
// declines. The cases are the shapes and the strings where go-yaml's choices differ.
func TestAppendYAMLMatchesGoYAML(t *testing.T) {
	cases := map[string]struct {
		reason   string
		obj      map[string]any
		declines bool
	}{
		"empty":           {reason: "an empty object is a flow mapping", obj: map[string]any{}},
		"nested":          {reason: "mappings indent by two, lists under a key do not", obj: map[string]any{"a": map[string]any{"b": []any{"x", map[string]any{"c": 1, "d": []any{}}, []any{"y", []any{"z"}}, map[string]any{}}}}},
		"key order":       {reason: "digits compare by value", obj: map[string]any{"port10": 1, "port2": 2, "port02": 3, "a": 4, "B": 5, "_": 6, "1": 7, "a1b": 8, "a1": 9, "a01": 10, "a10": 11}},
		"scalars":         {reason: "each JSON type", obj: map[string]any{"i": int64(-3), "f": 0.5, "g": 1e21, "h": float64(3), "n": nil, "t": true, "f2": false}},
		"quoted":          {reason: "strings that read as other types are double-quoted", obj: map[string]any{"a": "58130e46", "b": "true", "c": "yes", "d": "", "e": "1:20", "f": "null", "g": "~", "h": "0o17", "i": "2001-12-14", "j": `say "hi" \ bye`, "k": "<<"}},
		"single-quoted":   {reason: "strings a plain scalar would misread are single-quoted", obj: map[string]any{"a": "- x", "b": "a: b", "c": "x #y", "d": " lead", "e": "trail ", "f": "---x", "g": "*x", "h": "it's: here", "i": "@x", "j": ":", "k": "a:b", "l": "x#y", "m": "?x"}},
		"keys quoted":     {reason: "keys follow the same rules", obj: map[string]any{"yes": 1, "": 2, "a: b": 3, "1.5": 4}},
		"multi-line":      {reason: "block scalars are left to go-yaml", obj: map[string]any{"a": "x\ny"}, declines: true},
		"unicode":         {reason: "non-ASCII is left to go-yaml", obj: map[string]any{"a": "café"}, declines: true},
		"long key":        {reason: "a key over 128 bytes is a complex key", obj: map[string]any{strings.Repeat("k", 129): 1}, declines: true},
		"other type":      {reason: "a type JSON does not have", obj: map[string]any{"a": uint8(1)}, declines: true},
		"infinite floats": {reason: "as go-yaml writes them", obj: map[string]any{"a": math.Inf(1), "b": math.Inf(-1)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := appendYAML(nil, tc.obj)
			if ok == tc.declines {
				t.Fatalf("%s: appendYAML ok = %v, want %v", tc.reason, ok, !tc.declines)
			}
			if !ok {
				return
			}
			want, err := encodeGoYAML(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-go-yaml +appendYAML):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestAppendYAMLMatchesGoYAMLOnRandomObjects compares the two encoders on random objects built
// from the characters and words where YAML's rules turn.
func TestAppendYAMLMatchesGoYAMLOnRandomObjects(t *testing.T) {
	words := []string{"", " ", "a", "A", "z9", "0", "007", "1e3", "0x1F", "-", "-1", "+1", ".5", "1_000", "12:30:45",
		"true", "False", "yes", "on", "n", "null", "~", "<<", "---", "...", "2024-01-02", "2024-01-02T03:04:05Z",
		".inf", ".NaN", "port10", "port9", "é", "a:b", "a: b", "a #b", "a#b", "#a", "?", "? a", ":a", "'", "\"", "\\",
		"[x]", "{x}", "x,y", "&a", "*a", "!t", "|", ">", "%", "@", "`", "tab\there", "line\nbreak", "x ", " x"}
	r := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b strings.Builder
		for range 1 + r.IntN(3) {
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(10); {
		case k < 4 || depth > 3:
			switch r.IntN(6) {
			case 0:
				return int64(r.IntN(2000) - 1000)
			case 1:
				return r.NormFloat64() * math.Pow(10, float64(r.IntN(30)-15))
			case 2:
				return r.IntN(2) == 0
			case 3:
				return nil
			}
			return str()
		case k < 7:
			m := map[string]any{}
			for range r.IntN(5) {
				m[str()] = value(depth + 1)
			}
			return m
		default:
			s := make([]any, r.IntN(4))
			for i := range s {
				s[i] = value(depth + 1)
			}
			return s
		}
	}
	fast := 0
	for i := range 5000 {
		obj := map[string]any{}
		for range 1 + r.IntN(6) {
			obj[str()] = value(0)
		}
		want, err := encodeGoYAML(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendYAML(nil, obj)
		if !ok {
			continue
		}
		fast++
		if string(got) != string(want) {
			t.Fatalf("object %d (-go-yaml +appendYAML):\n%s", i, cmp.Diff(string(want), string(got)))
		}
	}
	if fast < 1000 {
		t.Errorf("only %d of 5000 random objects took the fast path; the test compares too little", fast)
	}
}

// TestAppendYAMLMatchesGoYAMLOnGoldens: every object of every golden output encodes the same
// both ways (most take the fast path).
func TestAppendYAMLMatchesGoYAMLOnGoldens(t *testing.T) {
	files, err := filepath.Glob("../golden/testdata/*/*/expected.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden outputs found: %v", err)
	}
	total, fast := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Parse(f, data)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range objs {
			total++
			want, err := encodeGoYAML(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := appendYAML(nil, o.Object)
			if !ok {
				continue
			}
			fast++
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s object %d (-go-yaml +appendYAML):\n%s", f, i, diff)
			}
		}
	}
	t.Logf("%d of %d golden objects took the fast path", fast, total)
	if fast*2 < total {
		t.Errorf("only %d of %d golden objects took the fast path", fast, total)
	}
}
