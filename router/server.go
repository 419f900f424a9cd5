package router

import (
	"net/http"
	"time"
)

// NewServer is the HTTP server for a Handler: HTTP/1.1 and h2c (HTTP/2 without TLS, for gRPC
// and multiplexing clients inside the cluster), with a bound on slow request headers. There is
// no read or write timeout: responses stream and upgraded connections live long; the Handler's
// proxy timeout bounds ordinary requests instead.
func NewServer(addr string, h http.Handler) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		Protocols:         &p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
