// Command sandbox-testserver is the program of the project's test image: the HTTP endpoints of
// package testimage, plus a TCP and a UDP echo server, so end-to-end tests have targets inside a
// real node that answer HTTP, WebSocket, SSE, plain TCP and plain UDP. See
// testimage.SettingsFromEnv for its environment.
//
// It runs as PID 1 in its container: it handles SIGTERM and SIGINT itself, ends open streams and
// WebSocket sessions, and exits 0 within five seconds, well inside a Pod's grace period. Exit
// status 2 means the environment is invalid, 1 that a listener could not start or failed.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testimage"
)

// shutdownGrace bounds how long open HTTP requests may take to finish after a signal; streams and
// WebSocket sessions are ended at once, so this is for requests in the middle of a dial or a write.
const shutdownGrace = 3 * time.Second

func main() {
	os.Exit(run())
}

func run() int {
	logger := log.New(os.Stderr, "sandbox-testserver: ", 0)
	s, err := testimage.SettingsFromEnv(os.Getenv, os.Hostname)
	if err != nil {
		logger.Print(err)
		return 2
	}
	sig, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()

	// Every listener is opened before any serves, so a port in use fails the start, not later.
	ln, tcpEcho, udpEcho, err := listen(s)
	if err != nil {
		logger.Print(err)
		return 1
	}

	// serving is the parent of every request's context: cancelling it on shutdown ends SSE
	// streams, WebSocket sessions (with 1001) and dials, which http.Server.Shutdown would wait for.
	serving, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	srv := &http.Server{
		Handler:           testimage.LogRequests(testimage.NewHandler(s.Config), os.Stderr),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return serving },
		ErrorLog:          logger,
	}
	failed := make(chan error, 3)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("http: %w", err)
		}
	})
	echoes := fmt.Sprintf("http on %s", ln.Addr())
	if tcpEcho != nil {
		echoes += fmt.Sprintf(", tcp echo on %s", tcpEcho.Addr())
		wg.Go(func() {
			if err := testimage.ServeTCPEcho(serving, tcpEcho); err != nil {
				failed <- fmt.Errorf("tcp echo: %w", err)
			}
		})
	}
	if udpEcho != nil {
		echoes += fmt.Sprintf(", udp echo on %s", udpEcho.LocalAddr())
		wg.Go(func() {
			if err := testimage.ServeUDPEcho(serving, udpEcho); err != nil {
				failed <- fmt.Errorf("udp echo: %w", err)
			}
		})
	}
	logger.Printf("pod %q namespace %q data %s: %s", s.PodName, s.Namespace, s.DataDir, echoes)

	code := 0
	select {
	case <-sig.Done():
		logger.Print("signal received, shutting down")
	case err := <-failed:
		logger.Print(err)
		code = 1
	}
	stopServing()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		logger.Printf("shutdown: %v; closing the remaining connections", err)
		srv.Close()
	}
	wg.Wait()
	return code
}

// listen opens the server's listeners: HTTP, and the TCP and UDP echoes when their ports are set
// (nil otherwise).
func listen(s testimage.Settings) (ln, tcpEcho net.Listener, udpEcho net.PacketConn, err error) {
	if ln, err = net.Listen("tcp", net.JoinHostPort(s.ListenHost, strconv.Itoa(s.Port))); err != nil {
		return nil, nil, nil, err
	}
	if s.TCPEchoPort != 0 {
		if tcpEcho, err = net.Listen("tcp", net.JoinHostPort(s.ListenHost, strconv.Itoa(s.TCPEchoPort))); err != nil {
			return nil, nil, nil, err
		}
	}
	if s.UDPEchoPort != 0 {
		if udpEcho, err = net.ListenPacket("udp", net.JoinHostPort(s.ListenHost, strconv.Itoa(s.UDPEchoPort))); err != nil {
			return nil, nil, nil, err
		}
	}
	return ln, tcpEcho, udpEcho, nil
}
