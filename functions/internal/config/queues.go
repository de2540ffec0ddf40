package config

import (
	"fmt"
	"strings"

	"github.com/sqsworker/sqsworker/pkg/queues"
)

// Environment variables of a stack with several queues (pkg/queues, docs/QUEUES.md).
const (
	// EnvQueues is the stack's queue set, "name=url,name=url" (queues.Parse): the worker serves
	// every one of them, producers send each kind to its queue.
	EnvQueues = "SQSWORKER_QUEUES"
	// EnvRoutes routes kinds to queues of EnvQueues, "kind=queue,kind=queue" (queues.ParseRoutes):
	// for functions without the workers' registry (the API), and for kinds a worker main
	// registered without jobs.WithQueue.
	EnvRoutes = "SQSWORKER_ROUTES"
)

// Queues is a function's view of the stack's queues.
type Queues struct {
	// Set is the queue set (SQSWORKER_QUEUES), nil for a stack of one queue.
	Set *queues.Set
	// Routes are the routes of SQSWORKER_ROUTES (nil without it).
	Routes queues.Routes
}

// loadQueues reads SQSWORKER_QUEUES and SQSWORKER_ROUTES. queueURL is the function's
// SQSWORKER_QUEUE_URL: with a set it must be empty or the default queue's (pinned is true for the
// worker, whose SQSWORKER_QUEUE_URL would pin every batch to one queue: it must then be empty).
func loadQueues(getenv func(string) string, queueURL string, pinned bool, errs *[]error) Queues {
	var q Queues
	if s := strings.TrimSpace(getenv(EnvQueues)); s != "" {
		set, err := queues.Parse(s)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				*errs = append(*errs, fmt.Errorf("%s: %s", EnvQueues, line))
			}
		}
		q.Set = set
	}
	if s := strings.TrimSpace(getenv(EnvRoutes)); s != "" {
		r, err := queues.ParseRoutes(s)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				*errs = append(*errs, fmt.Errorf("%s: %s", EnvRoutes, line))
			}
		}
		q.Routes = r
		if strings.TrimSpace(getenv(EnvQueues)) == "" {
			*errs = append(*errs, fmt.Errorf("%s is set without %s: routes name queues of the stack's queue set", EnvRoutes, EnvQueues))
		}
	}
	if q.Set == nil {
		return q
	}
	if err := q.Set.CheckRoutes(q.Routes); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			*errs = append(*errs, fmt.Errorf("%s: %s", EnvRoutes, line))
		}
	}
	switch {
	case queueURL == "":
	case pinned && q.Set.Len() > 1:
		*errs = append(*errs, fmt.Errorf("%s is set with %s: it would make the worker treat every batch as the one queue's; leave it unset (each batch's queue comes from its event source)", EnvQueueURL, EnvQueues))
	case queueURL != q.Set.Default().URL:
		*errs = append(*errs, fmt.Errorf("%s=%q is not the default queue of %s (%s)", EnvQueueURL, queueURL, EnvQueues, q.Set.Default().URL))
	}
	return q
}
