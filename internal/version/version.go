// Package version says which release and commit a binary of this repository was built from, the
// same way for every command, so a user's bug report names both whatever binary it is about.
//
// `make images` (hack/dist) sets both with -ldflags -X, because the build environment cannot be
// trusted to stamp VCS information itself: GOFLAGS=-buildvcs=false is common on CI machines, a
// git worktree's .git is a file, and a binary built from a copy of the source has no .git at
// all. Without the flags (go build, go run, go install) the module version and the vcs.revision
// Go stamps from the build info stand in.
package version

import (
	"runtime/debug"
	"strings"
)

// Set by hack/dist with -ldflags "-X <this package>.version=v0.1.0 -X <this package>.commit=<sha>".
// They are variables (not constants) only because -X can set nothing else.
var (
	version string
	commit  string
)

// LDFlags are the -ldflags -X arguments that stamp a binary with a version and commit.
func LDFlags(v, c string) []string {
	const pkg = "github.com/sandbox-gitops/sandbox-gitops/internal/version"
	return []string{"-X", pkg + ".version=" + v, "-X", pkg + ".commit=" + c}
}

// Info is a binary's version and commit.
type Info struct {
	// Version is the release (v0.1.0, v0.1.0-dirty for a build from a modified tree), or Go's
	// module version ((devel) for a local build).
	Version string
	// Commit is the full git commit, or "unknown" when nothing recorded it.
	Commit string
}

// Get is this binary's Info: the stamped values, else what the build info holds.
func Get() Info {
	return get(version, commit, debug.ReadBuildInfo)
}

func get(v, c string, read func() (*debug.BuildInfo, bool)) Info {
	if v == "" || c == "" {
		if bi, ok := read(); ok {
			if v == "" {
				v = bi.Main.Version
			}
			if c == "" {
				c = setting(bi, "vcs.revision")
				if c != "" && setting(bi, "vcs.modified") == "true" {
					c += "-dirty"
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	return Info{Version: v, Commit: c}
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// String is the line every command prints for --version: "NAME version V (commit C)".
func String(name string) string {
	i := Get()
	return i.line(name)
}

func (i Info) line(name string) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteString(" version ")
	b.WriteString(i.Version)
	b.WriteString(" (commit ")
	b.WriteString(i.Commit)
	b.WriteString(")")
	return b.String()
}
