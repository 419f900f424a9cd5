//go:build !linux

package main

import (
	"os"
	"testing"
)

// readOnlyDir makes dir read-only until the test ends by its mode; root ignores the mode, and
// the bind mount that stops root is Linux's, so the test is skipped as root.
func readOnlyDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("root ignores a directory's mode, and the read-only bind mount that stops it needs Linux")
	}
	chmodReadOnly(t, dir)
}
