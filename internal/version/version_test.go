package version

import (
	"runtime/debug"
	"testing"
)

// TestGet: stamped values win; the build info fills in what was not stamped; a binary with
// neither still says so rather than printing empty fields.
func TestGet(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}}
	withInfo := func() (*debug.BuildInfo, bool) { return info, true }
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	cases := map[string]struct {
		reason string
		v, c   string
		read   func() (*debug.BuildInfo, bool)
		want   string
	}{
		"stamped":    {reason: "-ldflags -X values are used as they are", v: "v0.1.0", c: "0123", read: withInfo, want: "x version v0.1.0 (commit 0123)"},
		"build info": {reason: "go build with VCS stamping: module version and revision, modified marked", read: withInfo, want: "x version v1.2.3 (commit abc-dirty)"},
		"nothing":    {reason: "-buildvcs=false and no flags", read: none, want: "x version (devel) (commit unknown)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := get(tc.v, tc.c, tc.read).line("x"); got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
