//go:build !linux

package deathsig

import "os/exec"

// Wrap returns the real paths: only Linux can tie a child's life to its parent's.
func Wrap(dir string, real map[string]string) (map[string]string, error) { return real, nil }

func setPdeathsig(*exec.Cmd) {}
