package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// largeCommand is issue 21's input: a Sandbox whose container command is a flow list of n
// one-letter entries (2 bytes each; 5.2M entries are 10 MB).
func largeCommand(n int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: big\n  namespace: default\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: c\n        image: busybox\n        command: [a")
	b.WriteString(strings.Repeat(",a", n-1))
	b.WriteString("]\n")
	return b.Bytes()
}

// BenchmarkLargeCommand validates issue 21's input at 1 MB (an object the API server takes, so
// validated in full) and 10 MB (over its 3 MiB request limit, refused before parsing) in
// process, reporting bytes/op and peak-heap/input (the most heap in use during a run, sampled,
// over the input's size), then once as the built binary, reporting validate-s and
// peak-RSS/input. Targets at 10 MB: peak RSS under 10x the input, under 5 s.
func BenchmarkLargeCommand(b *testing.B) {
	self := testenv.SandboxRender(b)
	for _, size := range []struct {
		name    string
		entries int
		code    int // validated, or refused as too large to apply (a read error)
	}{{"1MB", 520_000, cli.ExitOK}, {"10MB", 5_200_000, cli.ExitUsage}} {
		b.Run(size.name, func(b *testing.B) {
			dir := b.TempDir()
			in := filepath.Join(dir, "sandbox.yaml")
			data := largeCommand(size.entries)
			if err := os.WriteFile(in, data, 0o644); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			var peak uint64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				stop := sampleHeap(&peak)
				code := run([]string{"validate", in}, nil, io.Discard, io.Discard)
				stop()
				if code != size.code {
					b.Fatalf("validate exited %d, want %d", code, size.code)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(peak)/float64(len(data)), "peak-heap/input")

			m := runValidate(b, dir, self, in, size.code)
			b.ReportMetric(m.wall.Seconds(), "validate-s")
			b.ReportMetric(float64(m.rss)/float64(len(data)), "peak-RSS/input")
		})
	}
}

// sampleHeap records in peak the most heap in use until stop is called, every 200 µs.
func sampleHeap(peak *uint64) (stop func()) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			*peak = max(*peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// runValidate runs sandbox-render validate on in, which must exit with code.
func runValidate(b *testing.B, dir, self, in string, code int) measure {
	b.Helper()
	cmd := exec.Command(self, "validate", in)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// The child's own high-water mark, read while it runs: its rusage Maxrss would include this
	// process's peak (os/exec starts children sharing this process's memory until exec, and the
	// kernel keeps that memory's high-water mark).
	var hwm int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			if b, err := os.ReadFile(status); err == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
						kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
						hwm = max(hwm, kb*1024)
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	err := cmd.Wait()
	close(done)
	wg.Wait()
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			b.Fatalf("sandbox-render validate: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != code {
		b.Fatalf("sandbox-render validate exited %d, want %d\n%s", got, code, stderr.String())
	}
	return measure{wall: time.Since(start), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), rss: hwm}
}
