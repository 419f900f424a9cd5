package router

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the router's Prometheus series. Labels have small, fixed value sets (status
// codes, reasons), never sandbox names, so cardinality stays bounded however many sandboxes
// there are.
type Metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	refusals       *prometheus.CounterVec
	upstreamErrors *prometheus.CounterVec
	dialRetries    prometheus.Counter
	tunnels        prometheus.Gauge
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_requests_total",
			Help: "Requests handled, by HTTP status code sent to the client (101 for upgrades).",
		}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandbox_router_request_duration_seconds",
			Help:    "Time from receiving a request to the end of its response (to the switch for upgrades), by status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 180},
		}, []string{"code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_refusals_total",
			Help: "Requests the router answered itself without reaching a sandbox, by reason (InvalidHeader, SandboxNotFound, Forbidden, ...).",
		}, []string{"reason"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_errors_total",
			Help: "Failures talking to sandbox Pods, by reason (connection_refused, dial_timeout, unreachable, timeout, connection_reset, client_canceled, bad_upgrade, other).",
		}, []string{"reason"}),
		dialRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sandbox_router_dial_retries_total",
			Help: "Connects to sandbox Pods that were retried.",
		}),
		tunnels: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_router_open_tunnels",
			Help: "Upgraded connections (WebSocket and others) currently open.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.refusals, m.upstreamErrors, m.dialRetries, m.tunnels)
	return m
}

// codes holds the label values of the valid status codes, so the hot path does not format one.
var codes = func() (out [600]string) {
	for c := 100; c < 600; c++ {
		out[c] = strconv.Itoa(c)
	}
	return out
}()

func codeLabel(c int) string {
	if c >= 100 && c < 600 {
		return codes[c]
	}
	return strconv.Itoa(c)
}

func (m *Metrics) observe(code int, seconds float64) {
	if m == nil {
		return
	}
	l := codeLabel(code)
	m.requests.WithLabelValues(l).Inc()
	m.duration.WithLabelValues(l).Observe(seconds)
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) upstreamError(reason string) {
	if m != nil {
		m.upstreamErrors.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) retried() {
	if m != nil {
		m.dialRetries.Inc()
	}
}

func (m *Metrics) tunnel(delta float64) {
	if m != nil {
		m.tunnels.Add(delta)
	}
}

// Requests exposes sandbox_router_requests_total (for tests and embedding).
func (m *Metrics) Requests() *prometheus.CounterVec { return m.requests }

// Refusals exposes sandbox_router_refusals_total.
func (m *Metrics) Refusals() *prometheus.CounterVec { return m.refusals }

// UpstreamErrors exposes sandbox_router_upstream_errors_total.
func (m *Metrics) UpstreamErrors() *prometheus.CounterVec { return m.upstreamErrors }

// DialRetries exposes sandbox_router_dial_retries_total.
func (m *Metrics) DialRetries() prometheus.Counter { return m.dialRetries }

// OpenTunnels exposes sandbox_router_open_tunnels.
func (m *Metrics) OpenTunnels() prometheus.Gauge { return m.tunnels }
