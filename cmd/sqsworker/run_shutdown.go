package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

var brokenPipeOnce sync.Once

// keepRunningOnBrokenPipe makes a write to a closed stdout or stderr (`sqsworker run | tee log`
// after a Ctrl-C, which ends tee too) fail with EPIPE instead of killing the program with
// SIGPIPE: the commands that serve until Ctrl-C (run, up, demo) then still stop what they
// started, remove what they made and say "stopped" wherever it can be said. The signal is
// handled, not ignored, so that the processes they start get it with its default action.
// Commands that print and exit keep SIGPIPE's default: `sqsworker jobs … | head` ends quietly.
func keepRunningOnBrokenPipe() {
	brokenPipeOnce.Do(func() {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) // nobody reads it: the signal is dropped
	})
}
