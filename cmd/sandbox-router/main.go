// Command sandbox-router is the one way into a sandbox: a reverse proxy that takes upstream
// agent-sandbox's routing headers and forwards each request to the Pod of a Ready Sandbox found
// in its informer cache, and nowhere else.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
