package router

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// UpstreamOptions are the connection settings towards sandbox Pods. The zero value of a field
// means its default (DefaultUpstreamOptions).
type UpstreamOptions struct {
	// DialTimeout bounds one TCP connect.
	DialTimeout time.Duration
	// DialRetries is how many times a failed connect is retried (upstream: 3). Only connects
	// are retried, never a request, so a retry never sends anything twice. Negative disables.
	DialRetries int
	// RetryDelay is the wait before the first retry; it doubles each time (upstream: 200 ms,
	// 400 ms, 800 ms).
	RetryDelay time.Duration
	// ResponseHeaderTimeout bounds the wait for the Pod's response headers; 0 leaves it to
	// the proxy timeout.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout closes kept-alive connections to Pods after this long unused.
	IdleConnTimeout time.Duration
	// MaxIdleConnsPerHost is how many kept-alive connections to one Pod are pooled.
	MaxIdleConnsPerHost int
	// MaxConnsPerHost caps connections to one Pod (0: no cap).
	MaxConnsPerHost int
}

// DefaultUpstreamOptions are upstream's dial retries with bounded, pooled connections.
var DefaultUpstreamOptions = UpstreamOptions{
	DialTimeout:         5 * time.Second,
	DialRetries:         3,
	RetryDelay:          200 * time.Millisecond,
	IdleConnTimeout:     90 * time.Second,
	MaxIdleConnsPerHost: 256,
}

func (o UpstreamOptions) withDefaults() UpstreamOptions {
	d := DefaultUpstreamOptions
	if o.DialTimeout > 0 {
		d.DialTimeout = o.DialTimeout
	}
	switch {
	case o.DialRetries < 0:
		d.DialRetries = 0
	case o.DialRetries > 0:
		d.DialRetries = o.DialRetries
	}
	if o.RetryDelay > 0 {
		d.RetryDelay = o.RetryDelay
	}
	d.ResponseHeaderTimeout = o.ResponseHeaderTimeout
	if o.IdleConnTimeout > 0 {
		d.IdleConnTimeout = o.IdleConnTimeout
	}
	if o.MaxIdleConnsPerHost > 0 {
		d.MaxIdleConnsPerHost = o.MaxIdleConnsPerHost
	}
	d.MaxConnsPerHost = o.MaxConnsPerHost
	return d
}

// dialer connects to Pods, retrying connects that failed before anything was sent: a Pod that
// just became Ready may not listen yet, and its IP may not be routable from every node yet.
type dialer struct {
	net.Dialer
	retries int
	delay   time.Duration
	onRetry func()
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	delay := d.delay
	for attempt := 0; ; attempt++ {
		c, err := d.Dialer.DialContext(ctx, network, addr)
		if err == nil || attempt >= d.retries || !retriableDial(err) || ctx.Err() != nil {
			return c, err
		}
		if d.onRetry != nil {
			d.onRetry()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay *= 2
	}
}

// retriableDial: the connect was refused, timed out or found no route; nothing was sent.
func retriableDial(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, os.ErrDeadlineExceeded) ||
		isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// newTransport is the explicit transport STYLE §8 asks for: dial retries and timeouts, pooled
// connections per Pod, and no transparent gzip (a proxy passes bodies through as they are).
func newTransport(o UpstreamOptions, d *dialer) *http.Transport {
	return &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConns:          0, // bounded per host below
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		MaxConnsPerHost:       o.MaxConnsPerHost,
		IdleConnTimeout:       o.IdleConnTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false, // Pods speak HTTP/1.1; upgrades need it
	}
}

func netDialer(timeout time.Duration) net.Dialer {
	return net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
}
