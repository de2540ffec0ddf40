package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/queues"
)

const qurl = "https://sqs.eu-west-1.amazonaws.com/123456789012/shop-jobs"

var stackQueues = "critical=" + qurl + "-critical,default=" + qurl + ",bulk=" + qurl + "-bulk"

func TestQueuesFromTheEnvironment(t *testing.T) {
	t.Parallel()
	w, err := LoadWorker(env(map[string]string{EnvQueues: stackQueues, EnvRoutes: "email.send=critical,import.run=bulk"}))
	if err != nil {
		t.Fatal(err)
	}
	if w.Queues.Set == nil || w.Queues.Set.String() != stackQueues || w.Queues.Routes.QueueOf("import.run") != "bulk" {
		t.Errorf("worker queues = %+v", w.Queues)
	}
	api, err := LoadAPI(env(map[string]string{EnvQueues: stackQueues, EnvRoutes: "email.send=critical", EnvAPIKinds: "email.send"}))
	if err != nil {
		t.Fatal(err)
	}
	if api.QueueURL != qurl || api.Queues.Set.Len() != 3 {
		t.Errorf("API: QueueURL %s (want the default queue's), %d queues", api.QueueURL, api.Queues.Set.Len())
	}
	r, err := LoadRelay(env(map[string]string{EnvQueues: stackQueues, EnvOutboxTable: "shop-outbox"}))
	if err != nil || r.QueueURL != qurl || r.Queues.Set == nil {
		t.Errorf("relay = %+v, %v", r, err)
	}
	pg, err := LoadPGRelay(env(map[string]string{EnvQueues: stackQueues, EnvOutboxDSN: "postgres://x@y/z"}))
	if err != nil || pg.QueueURL != qurl || pg.Queues.Set == nil {
		t.Errorf("pgrelay = %+v, %v", pg, err)
	}
	one, err := LoadWorker(env(map[string]string{EnvQueueURL: qurl}))
	if err != nil || one.Queues.Set != nil {
		t.Errorf("a worker of one queue: %+v, %v", one.Queues, err)
	}
}

func TestQueuesEnvironmentErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		load     func(map[string]string) error
		env      map[string]string
		mentions []string
	}{
		{"two queues with one name", loadW, map[string]string{EnvQueues: "bulk=" + qurl + "-a,bulk=" + qurl + "-b"},
			[]string{"SQSWORKER_QUEUES: queues: invalid queue set: two queues are named \"bulk\""}},
		{"a route to a queue the stack lacks", loadA, map[string]string{EnvQueues: stackQueues, EnvRoutes: "email.send=urgent", EnvAPIKinds: "email.send"},
			[]string{`SQSWORKER_ROUTES: kind email.send is routed to queue "urgent"`, "the stack's queues: critical, default, bulk"}},
		{"routes without queues", loadA, map[string]string{EnvQueueURL: qurl, EnvRoutes: "email.send=bulk", EnvAPIKinds: "email.send"},
			[]string{"SQSWORKER_ROUTES is set without SQSWORKER_QUEUES"}},
		{"a bad route", loadW, map[string]string{EnvQueues: stackQueues, EnvRoutes: "email.send"}, []string{"want kind=queue"}},
		{"the worker pinned to one queue", loadW, map[string]string{EnvQueues: stackQueues, EnvQueueURL: qurl},
			[]string{"SQSWORKER_QUEUE_URL is set with SQSWORKER_QUEUES", "leave it unset"}},
		{"a producer's queue URL not the default", loadA, map[string]string{EnvQueues: stackQueues, EnvQueueURL: qurl + "-bulk", EnvAPIKinds: "email.send"},
			[]string{"is not the default queue of SQSWORKER_QUEUES"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.load(tc.env)
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
	_, err := LoadWorker(env(map[string]string{EnvQueues: "x"}))
	if !errors.Is(err, queues.ErrInvalid) && !strings.Contains(err.Error(), "want name=url") {
		t.Errorf("a bad set: %v", err)
	}
}

func loadW(m map[string]string) error { _, err := LoadWorker(env(m)); return err }
func loadA(m map[string]string) error { _, err := LoadAPI(env(m)); return err }
