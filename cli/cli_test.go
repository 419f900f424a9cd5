package cli

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// TestExitCodes: the numbers are the contract every command's --help documents.
func TestExitCodes(t *testing.T) {
	if diff := cmp.Diff([]int{0, 1, 2}, []int{ExitOK, ExitFailure, ExitUsage}); diff != "" {
		t.Errorf("exit codes (-want +got):\n%s", diff)
	}
}

func TestRun(t *testing.T) {
	type result struct {
		Code   int
		Stderr string
	}
	cases := map[string]struct {
		reason string
		args   []string
		err    error
		want   result
	}{
		"done": {
			reason: "no error: exit 0, nothing on standard error",
			want:   result{ExitOK, ""},
		},
		"no arguments": {
			reason: "nil arguments are none, not the process's own",
			args:   nil,
			want:   result{ExitOK, ""},
		},
		"failure": {
			reason: "an ExitError ends with its code and its message in one line",
			err:    &ExitError{Code: ExitFailure, Err: errors.New("the manager stopped")},
			want:   result{ExitFailure, "tool: the manager stopped\n"},
		},
		"usage": {
			reason: "Usagef is a usage error",
			err:    Usagef("--n %d: must be positive", -1),
			want:   result{ExitUsage, "tool: --n -1: must be positive\n"},
		},
		"silent": {
			reason: "an ExitError without a message ends with its code and says nothing",
			err:    &ExitError{Code: ExitFailure},
			want:   result{ExitFailure, ""},
		},
		"plain error": {
			reason: "an error without a code is a usage error",
			err:    errors.New("bad"),
			want:   result{ExitUsage, "tool: bad\n"},
		},
		"cobra's error": {
			reason: "cobra's own errors (an unknown flag) are usage errors",
			args:   []string{"--nope"},
			want:   result{ExitUsage, "tool: unknown flag: --nope\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := &cobra.Command{
				Use: "tool", SilenceErrors: true, SilenceUsage: true,
				RunE: func(*cobra.Command, []string) error { return tc.err },
			}
			var stderr bytes.Buffer
			got := result{Run(cmd, tc.args, &stderr), stderr.String()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
