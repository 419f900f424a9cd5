//go:build linux

package main

import (
	"os"
	"syscall"
	"testing"
)

// readOnlyDir makes dir read-only until the test ends, even for root, which ignores permissions:
// as root dir is bind-mounted onto itself and the mount made read-only (always unmounted in
// t.Cleanup, also when the test fails); otherwise its mode becomes 0555. It skips the test when
// neither is possible here.
func readOnlyDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		chmodReadOnly(t, dir)
		return
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("as root a read-only directory needs a bind mount, and mounting is not permitted here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Busy: detach it now, the kernel removes it when the last user goes.
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("the read-only bind mount on %s is left behind: %v", dir, err)
			}
		}
	})
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("as root a read-only directory needs a read-only bind mount, and remounting is not permitted here: %v", err)
	}
	checkReadOnly(t, dir)
}
