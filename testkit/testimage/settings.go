package testimage

import (
	"fmt"
	"strconv"
)

// Defaults of sandbox-testserver's environment.
const (
	DefaultPort        = 8080
	DefaultUDPEchoPort = 9053
	DefaultTCPEchoPort = 9000
	DefaultDataDir     = "/data"
)

// Settings is what sandbox-testserver reads from its environment.
type Settings struct {
	Config
	// ListenHost is the address every listener binds; empty means all addresses (a Pod's
	// container), 127.0.0.1 keeps a test on loopback.
	ListenHost string
	// Port is the HTTP port.
	Port int
	// UDPEchoPort and TCPEchoPort are the echo servers' ports; 0 disables one.
	UDPEchoPort int
	TCPEchoPort int
}

// SettingsFromEnv reads POD_NAME (default: the hostname, which is the Pod's name in Kubernetes),
// POD_NAMESPACE, DATA_DIR (default /data), LISTEN_HOST, PORT (default 8080), UDP_ECHO_PORT (default
// 9053) and TCP_ECHO_PORT (default 9000; 0 disables an echo server). The error names the variable.
func SettingsFromEnv(getenv func(string) string, hostname func() (string, error)) (Settings, error) {
	s := Settings{
		Config: Config{
			PodName:   getenv("POD_NAME"),
			Namespace: getenv("POD_NAMESPACE"),
			DataDir:   getenv("DATA_DIR"),
		},
		ListenHost: getenv("LISTEN_HOST"),
	}
	if s.PodName == "" {
		h, err := hostname()
		if err != nil {
			return Settings{}, fmt.Errorf("POD_NAME: Required value: it is unset and the hostname is unknown: %w", err)
		}
		s.PodName = h
	}
	if s.DataDir == "" {
		s.DataDir = DefaultDataDir
	}
	for _, p := range []struct {
		name   string
		def    int
		zeroOK bool
		into   *int
	}{
		{"PORT", DefaultPort, false, &s.Port},
		{"UDP_ECHO_PORT", DefaultUDPEchoPort, true, &s.UDPEchoPort},
		{"TCP_ECHO_PORT", DefaultTCPEchoPort, true, &s.TCPEchoPort},
	} {
		v := getenv(p.name)
		if v == "" {
			*p.into = p.def
			continue
		}
		lo := 1
		if p.zeroOK {
			lo = 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > 65535 {
			return Settings{}, fmt.Errorf("%s: Invalid value: %q: must be an integer between %d and 65535", p.name, v, lo)
		}
		*p.into = n
	}
	return s, nil
}
