// Package console is sqsworker's operator web console: an http.Handler that shows a job
// system's queues, jobs, dead letters and schedules, and acts on them (redrive, cancel, purge,
// enqueue, schedule), on the same library calls as the sqsworker CLI — pkg/status, pkg/dlq,
// pkg/schedule and the producer — so that the console and the CLI never disagree.
//
//	h, err := console.New(console.Config{
//		Status: table, DLQ: deadLetters, Schedules: schedules, Producer: prod,
//		SQS: sqsClient, QueueURL: queueURL, DLQURL: dlqURL,
//		Stats: &console.CloudWatchStats{CloudWatch: cw, Queue: "myapp-jobs", DLQ: "myapp-jobs-dlq"},
//		Prefix: "/ops/jobs", Token: os.Getenv("SQSWORKER_UI_TOKEN"),
//	})
//	mux.Handle("/ops/jobs/", yourAuth(h))
//
// `sqsworker ui --stack NAME` serves it on 127.0.0.1:8080; docs/CONSOLE.md says how to run it,
// how to mount it in a service of your own, and its safety model.
//
// # Pages
//
// Overview (queue depths, the oldest message's age, per-kind charts of the last hour or day,
// refreshed every few seconds), Jobs (by state from the by_status index, paged, by kind; found
// by id or by kind and key), Job (its record, envelope and dead letter; redrive, cancel, enqueue
// a copy), Dead letters (a peek, paged; redrive one or all with a progress bar; purge; delete one
// that is no job), Schedules
// (recurring ones with their next runs, and the one-time schedules of delayed jobs) and Enqueue.
// Every list pages and says what to do when it is empty. The assets (HTML templates, one CSS and
// one JavaScript file) are embedded: the console needs no build step.
//
// # Safety
//
// Every value that comes from a job (args, errors, kinds, keys, ids, attributes, bodies) is
// attacker-controlled text: the pages escape it with html/template (Go's own, through
// github.com/DataDog/datadog-agent/pkg/template, which is its code without method calls from a
// template: a program that can call methods by a name known only at run time keeps every
// exported method of every type it links, 14 MB of the CLI), show control and
// bidirectional characters as visible escapes (\x1b, \u202e), the JavaScript writes it only
// with textContent, and invalid UTF-8 is replaced. Responses carry a strict
// Content-Security-Policy (scripts and styles from the console's own files only, nothing
// inline). Job args and message bodies are hidden unless Config.ShowArgs. Reading needs no
// token, but for the DLQ: a peek is a receive of every message it shows (it raises the
// message's ApproximateReceiveCount and hides it while the peek runs), so the pages that peek
// need Config.Token when the console has sign-ins, refuse cross-site requests, and share one
// peek per Config.PeekCacheFor whatever a request or a record says. Every action needs the
// token: a browser signs in with it (the sign-in form, or a one-time link from
// Console.SignInLink; never in a URL) and gets a session of its own — a random value in an
// HttpOnly, SameSite=Strict cookie named after the console's port, Secure over TLS or with
// Config.SecureCookie, ended at Config.SessionLifetime or at sign-out, on the server — and a
// script sends an "Authorization: Bearer" header. Every action is a POST with the session's CSRF
// token and a cross-origin check, is offered only where it can work, and writes one structured
// log line (who, what, which job). Config.ReadOnly hides and refuses every action.
package console
