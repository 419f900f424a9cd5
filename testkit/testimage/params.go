package testimage

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// The errors of query parameters read like Kubernetes field errors, naming the parameter, so a
// test's failure message says which part of its URL to fix.

func requiredParam(name string) error {
	return fmt.Errorf("%s: Required value", name)
}

func invalidParam(name, value, why string) error {
	return fmt.Errorf("%s: Invalid value: %q: %s", name, value, why)
}

// durationParam reads a Go duration in (0, max], or def when the parameter is absent. zeroOK also
// admits 0 (an SSE interval of 0 sends the events back to back).
func durationParam(q url.Values, name string, def, max time.Duration, zeroOK bool) (time.Duration, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, invalidParam(name, v, "must be a duration such as 200ms or 2s")
	}
	if d < 0 || (d == 0 && !zeroOK) || d > max {
		low := "more than 0"
		if zeroOK {
			low = "0 or more"
		}
		return 0, invalidParam(name, v, fmt.Sprintf("must be %s and at most %s", low, max))
	}
	return d, nil
}

// intParam reads a decimal integer in [lo, hi], or def when the parameter is absent.
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalidParam(name, v, fmt.Sprintf("must be an integer between %d and %d", lo, hi))
	}
	return n, nil
}

// hostPortParam reads a required HOST:PORT with a numeric port 1-65535. HOST may be a name, which
// the dial then resolves from inside the Pod, as a workload would.
func hostPortParam(q url.Values, name string) (string, error) {
	v := q.Get(name)
	if v == "" {
		return "", requiredParam(name)
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", invalidParam(name, v, "must be HOST:PORT")
	}
	if host == "" {
		return "", invalidParam(name, v, "the host must not be empty")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || len(port) > 5 {
		return "", invalidParam(name, v, "the port must be an integer between 1 and 65535")
	}
	return v, nil
}
