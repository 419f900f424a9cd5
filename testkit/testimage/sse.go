package testimage

import (
	"fmt"
	"net/http"
	"time"
)

// Limits of GET /sse: enough for a test that holds a stream open for minutes, bounded so a typo
// cannot tie a connection up for hours.
const (
	defaultSSEEvents   = 5
	maxSSEEvents       = 1000
	defaultSSEInterval = 200 * time.Millisecond
	maxSSEInterval     = 10 * time.Second
)

// serveSSE sends n events, id 1 to n, each flushed as soon as it is written, with interval
// between them. A proxy that buffers shows as the first event arriving with the last; a test
// measures exactly that. It stops when the client goes away (or the server shuts down).
func (h *handler) serveSSE(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := intParam(q, "n", defaultSSEEvents, 0, maxSSEEvents)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	interval, err := durationParam(q, "interval", defaultSSEInterval, maxSSEInterval, true)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	var timer *time.Timer
	for i := 1; i <= n; i++ {
		if r.Context().Err() != nil {
			return
		}
		if i > 1 && interval > 0 {
			if timer == nil {
				timer = time.NewTimer(interval)
				defer timer.Stop()
			} else {
				timer.Reset(interval)
			}
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
		}
		if _, err := fmt.Fprintf(w, "id: %d\ndata: %d %s\n\n", i, i, h.cfg.PodName); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
