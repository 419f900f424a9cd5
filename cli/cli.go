// Package cli is what every command of this repository does alike at its edge, written once so
// that the exit-code contract cannot drift between binaries: 0 when the command did what was
// asked, 1 when it could not, 2 for a usage or configuration error, in sandbox-controller,
// sandbox-router and sandbox-render the same; and an error is reported in one line on standard
// error, "<command>: <error>", never with the usage text or a stack trace.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// The exit codes. Each command's --help says what they mean for it.
const (
	// ExitOK: the command did what was asked (for a server: it stopped cleanly).
	ExitOK = 0
	// ExitFailure: it could not: a server failed to start or to keep running, or sandbox-render's
	// input has problems (each reported with its file and document).
	ExitFailure = 1
	// ExitUsage: a usage or configuration error: an unknown flag, a bad value, an unreadable
	// file, nothing to do. Also every error that carries no code, such as cobra's own.
	ExitUsage = 2
)

// ExitError is an error that ends the process with Code. With no Err the process ends silently:
// what there was to say has been said.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Usagef is a usage error (ExitUsage) with a formatted message.
func Usagef(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Run runs cmd on args and returns the exit code the process ends with, having reported an error
// as Exit does under the command's name.
func Run(cmd *cobra.Command, args []string, stderr io.Writer) int {
	return Exit(cmd.Name(), Execute(cmd, args), stderr)
}

// Execute runs cmd on args. No arguments are no arguments: cobra given nil would read the
// process's own.
func Execute(cmd *cobra.Command, args []string) error {
	if args == nil {
		args = []string{}
	}
	cmd.SetArgs(args)
	return cmd.Execute()
}

// Exit is the exit code for err, the error a command named name returned: ExitOK for none, the
// code of an ExitError, ExitUsage for any other. It reports err on stderr in one line, unless it
// is an ExitError without a message.
func Exit(name string, err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	if ee.Err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	return ee.Code
}
