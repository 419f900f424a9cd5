package upstream

import "github.com/sandbox-gitops/sandbox-gitops/internal/cluster"

// SandboxdImage is the image upstream's TestRunSandboxdSandbox runs: its getImagePrefix() +
// "sandboxd:" + getImageTag() with their defaults (kind.local/ and latest), since Environ leaves
// IMAGE_PREFIX and IMAGE_TAG unset. The registry host resolves nowhere: with the image imported
// the kubelet never pulls it (imagePullPolicy IfNotPresent), and a pull would fail at once.
const SandboxdImage = "kind.local/sandboxd:latest"

// SandboxdUID is the user upstream's sandboxd image runs as (its Dockerfile's USER 1000), whose
// Pods ask for runAsUser 1000 and runAsNonRoot, and who owns /workspace.
const SandboxdUID = 1000

// busyboxApplets are the commands the sandboxd image answers to through busybox: upstream's
// image is debian:bookworm-slim plus procps, because its ProcessService runs what a client sends
// with /bin/sh -c (the Go SDK always does) and the commands an agent expects. These are the
// shell, coreutils' everyday commands and procps' ps and kill, all busybox applets.
var busyboxApplets = []string{
	"sh", "cat", "cp", "date", "echo", "env", "false", "grep", "head", "id", "kill", "ln", "ls",
	"mkdir", "mv", "printf", "ps", "pwd", "rm", "rmdir", "sed", "sleep", "sort", "tail", "test",
	"touch", "true", "uname", "wc",
}

// SandboxdNodeImage is upstream's sandboxd image (packages/sandboxd/Dockerfile) built for the
// real node from static binaries instead of a Debian base: sandboxd (hack/tools.sh's, from the
// same module) as the entrypoint, busybox (Debian's busybox-static) as /bin/sh and the commands
// of busyboxApplets, /workspace (sandboxd's --root-dir) owned by SandboxdUID, and that user.
func SandboxdNodeImage(sandboxd, busybox string) cluster.NodeImage {
	links := map[string]string{}
	for _, a := range busyboxApplets {
		links["bin/"+a] = "/usr/local/bin/busybox"
	}
	return cluster.NodeImage{
		Ref:    SandboxdImage,
		Binary: sandboxd,
		User:   "1000:1000",
		Files:  map[string]string{"usr/local/bin/busybox": busybox},
		Dirs:   map[string]int{"workspace": SandboxdUID},
		Links:  links,
	}
}
