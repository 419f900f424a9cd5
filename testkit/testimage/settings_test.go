package testimage

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSettingsFromEnv(t *testing.T) {
	cases := map[string]struct {
		reason   string
		env      map[string]string
		hostname string // "" makes os.Hostname fail
		want     Settings
		wantErr  string // the variable the error names
	}{
		"defaults": {
			reason:   "an empty environment takes the hostname as the Pod name and the documented ports",
			hostname: "web-0",
			want: Settings{Config: Config{PodName: "web-0", DataDir: "/data"},
				Port: 8080, UDPEchoPort: 9053, TCPEchoPort: 9000},
		},
		"everything set": {
			reason: "the downward API's values win over the hostname",
			env: map[string]string{"POD_NAME": "web-1", "POD_NAMESPACE": "team-a", "DATA_DIR": "/var/data",
				"LISTEN_HOST": "127.0.0.1", "PORT": "8888", "UDP_ECHO_PORT": "53", "TCP_ECHO_PORT": "7"},
			hostname: "ignored",
			want: Settings{Config: Config{PodName: "web-1", Namespace: "team-a", DataDir: "/var/data"},
				ListenHost: "127.0.0.1", Port: 8888, UDPEchoPort: 53, TCPEchoPort: 7},
		},
		"echo servers off": {
			reason:   "0 disables an echo server",
			env:      map[string]string{"POD_NAME": "p", "UDP_ECHO_PORT": "0", "TCP_ECHO_PORT": "0"},
			want:     Settings{Config: Config{PodName: "p", DataDir: "/data"}, Port: 8080},
			hostname: "h",
		},
		"no name at all": {
			reason:  "without POD_NAME and a hostname there is no Pod name to report",
			wantErr: "POD_NAME",
		},
		"port 0": {
			reason: "the HTTP server cannot be disabled", env: map[string]string{"PORT": "0"}, hostname: "h",
			wantErr: "PORT",
		},
		"port not a number": {
			reason: "ports are decimal", env: map[string]string{"TCP_ECHO_PORT": "echo"}, hostname: "h",
			wantErr: "TCP_ECHO_PORT",
		},
		"port too big": {
			reason: "ports end at 65535", env: map[string]string{"UDP_ECHO_PORT": "65536"}, hostname: "h",
			wantErr: "UDP_ECHO_PORT",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hostname := func() (string, error) {
				if tc.hostname == "" {
					return "", errors.New("no hostname")
				}
				return tc.hostname, nil
			}
			got, err := SettingsFromEnv(func(k string) string { return tc.env[k] }, hostname)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr+": ") {
					t.Fatalf("%s: error %v, want one naming %s", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
