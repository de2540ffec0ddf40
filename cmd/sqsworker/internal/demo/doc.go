// Package demo is the end-to-end demonstration behind `sqsworker demo` (`make demo`): it
// provisions a queue, its DLQ, the job table and a schedule group on the embedded emulator,
// enqueues a mix of jobs, runs the poller with the worker and the local schedule dispatcher
// until every job is settled, and reports what happened.
package demo

import "github.com/sqsworker/sqsworker/examples/examplejobs"

// Register adds the example kinds (see package examplejobs).
var Register = examplejobs.Register
