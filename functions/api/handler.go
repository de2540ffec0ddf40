package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Producer builds and sends jobs. *producer.Producer implements it.
type Producer interface {
	PrepareRaw(ctx context.Context, kind string, args json.RawMessage, opts ...producer.Option) (producer.Message, error)
	Send(ctx context.Context, msgs []producer.Message) ([]producer.Result, error)
	FIFO() bool
}

// StatusReader reads a job's record by its id. *status.Table implements it.
type StatusReader interface {
	GetByID(ctx context.Context, jobID string) (status.Job, error)
}

// Waiter waits for a job's final state (GET /jobs/{id}?wait=…). *status.Table implements it; a
// StatusReader that does not answers such a request at once.
type Waiter interface {
	Wait(ctx context.Context, jobID string, opts status.WaitOptions) (status.Job, error)
}

// MaxWait bounds GET /jobs/{id}?wait=…: a longer value is refused (400). The wait also ends a
// second before the function's deadline (the stack's API timeout is 10 s by default: raise it to
// 25 s for 20-second waits).
const MaxWait = 20 * time.Second

// waitMargin is kept before the function's deadline to answer.
const waitMargin = time.Second

// waitParam reads the wait query parameter: a Go duration ("20s", "1.5s", "500ms") or whole
// seconds ("20"), from 0 to MaxWait; absent: 0.
func waitParam(req events.LambdaFunctionURLRequest) (time.Duration, error) {
	v, ok := req.QueryStringParameters["wait"]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, fmt.Errorf("wait=%q: want a duration such as 20s (or whole seconds), from 0 to %s", clipParam(v), MaxWait)
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > MaxWait {
		return 0, fmt.Errorf("wait=%q: want a duration from 0 to %s", clipParam(v), MaxWait)
	}
	return d, nil
}

// clipParam shortens a parameter for an error message.
func clipParam(v string) string {
	if r := []rune(v); len(r) > 32 {
		return string(r[:32]) + "…"
	}
	return v
}

// waitFor waits up to wait (and no later than a second before ctx's deadline) for the final state
// of job, and returns the last record read: the final one, or the one current when the wait
// ended.
func waitFor(ctx context.Context, w Waiter, id string, wait time.Duration, job status.Job) (status.Job, error) {
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-waitMargin)
	}
	if wait <= 0 {
		return job, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	j, err := w.Wait(wctx, id, status.WaitOptions{NotFoundAfter: time.Nanosecond})
	switch {
	case err == nil:
		return j, nil
	case errors.Is(err, context.DeadlineExceeded) && wctx.Err() != nil && ctx.Err() == nil:
		if j.State != "" {
			return j, nil
		}
		return job, nil
	}
	return status.Job{}, err
}

// Reserver writes a job's queued record before its message is sent, unless its key already has
// one, frees the key again when the send fails, and marks a queued job sent once a repeated
// request has sent it again. *status.Table implements it.
type Reserver interface {
	ReserveQueued(ctx context.Context, j status.QueuedJob) (status.Job, bool, error)
	ReleaseQueued(ctx context.Context, kind, key, jobID string) error
	MarkSent(ctx context.Context, kind, key, jobID string, at time.Time) error
}

// API answers the function URL's requests: POST /jobs enqueues, GET /jobs/{id} reads a status.
type API struct {
	// Producer enqueues the jobs. Required.
	Producer Producer
	// Policy admits jobs: the allow-list of kinds, their args limits and schemas. Defaults to
	// nil: nothing is enqueued (every POST answers 403).
	Policy *Policy
	// Status reads job records. Defaults to nil: GET /jobs/{id} answers 501.
	Status StatusReader
	// Reserver makes requests idempotent: each POST reserves its job key (the Idempotency-Key
	// header, else the new job's id) before the send, so that a repeated key with the same
	// request (kind, args, delay, group) gets the first answer back (202, the same id) and any
	// other request with that key 409. Defaults to nil: every request sends a new message (the
	// worker's own idempotency still runs a key once).
	Reserver Reserver
	// ShowDetails makes GET /jobs/{id} show the key, the dead-letter reason, the last error and
	// the stored result. Defaults to false: id, kind, state, attempts and timestamps only.
	ShowDetails bool
	// Logger receives server-side failures and refused requests. Defaults to slog.Default().
	Logger *slog.Logger
	// Clock gives the reservations' time. Defaults to time.Now.
	Clock func() time.Time
	// Dedup enqueues the requests that ask for a deduplication rule ("unique", "debounce",
	// "throttle"; dedup.go), for the kinds SQSWORKER_API_DEDUP allows it. Defaults to nil: such
	// requests answer 501.
	Dedup Deduper
}

// maxBodyBytes bounds a request body (SQS's own message limit is 1 MiB).
const maxBodyBytes = 1 << 20

// maxSQSDelay is SQS's per-message delay limit; the API has no scheduler for longer ones.
const maxSQSDelay = 15 * time.Minute

// enqueueRequest is POST /jobs's body.
type enqueueRequest struct {
	Kind  string          `json:"kind"`
	Args  json.RawMessage `json:"args"`
	Delay string          `json:"delay"`
	Group string          `json:"group"`
	// Unique, Debounce and Throttle ask for a deduplication rule (dedup.go): one at most.
	Unique   *uniqueRequest   `json:"unique"`
	Debounce *debounceRequest `json:"debounce"`
	Throttle *throttleRequest `json:"throttle"`
}

// enqueueResponse is POST /jobs's answer.
type enqueueResponse struct {
	ID        string `json:"id"`
	Key       string `json:"key"`
	StatusURL string `json:"status_url"`
}

// jobResponse is GET /jobs/{id}'s answer: the record without its claim internals, and without
// the details (key, reason, last error, result) unless ShowDetails.
type jobResponse struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	State          string          `json:"state"`
	Attempts       int             `json:"attempts"`
	FirstAttemptAt string          `json:"first_attempt_at,omitempty"`
	LastAttemptAt  string          `json:"last_attempt_at,omitempty"`
	UpdatedAt      string          `json:"updated_at,omitempty"`
	ExpiresAt      string          `json:"expires_at,omitempty"`
	RunAt          string          `json:"run_at,omitempty"`
	Expired        bool            `json:"expired,omitempty"`
	Key            string          `json:"key,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	// Progress is the run's last progress report (its message only with ShowDetails).
	Progress *progressResponse `json:"progress,omitempty"`
	// CancelRequestedAt is when a cancellation of the running job was requested.
	CancelRequestedAt string `json:"cancel_requested_at,omitempty"`
}

// progressResponse is a job's last progress report in GET /jobs/{id}'s answer.
type progressResponse struct {
	Fraction float64 `json:"fraction"`
	Message  string  `json:"message,omitempty"`
	At       string  `json:"at"`
}

// errorResponse is every error's body; Fields lists a schema's violations.
type errorResponse struct {
	Error  string       `json:"error"`
	Fields []FieldError `json:"fields,omitempty"`
}

// Handle serves one function URL request.
func (a *API) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	method := req.RequestContext.HTTP.Method
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	path = strings.TrimSuffix(path, "/")
	switch {
	case path == "/jobs":
		if method != http.MethodPost {
			return methodNotAllowed(http.MethodPost), nil
		}
		return a.enqueue(ctx, req), nil
	case strings.HasPrefix(path, "/jobs/") && !strings.Contains(path[len("/jobs/"):], "/"):
		if method != http.MethodGet && method != http.MethodHead {
			return methodNotAllowed(http.MethodGet), nil
		}
		wait, err := waitParam(req)
		if err != nil {
			return badRequest(err.Error()), nil
		}
		return a.get(ctx, path[len("/jobs/"):], principal(req), wait), nil
	}
	return reply(http.StatusNotFound, errorResponse{Error: fmt.Sprintf("no route for %s %s: use POST /jobs or GET /jobs/{id}", method, path)}), nil
}

func (a *API) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func (a *API) now() time.Time {
	if a.Clock != nil {
		return a.Clock()
	}
	return time.Now()
}

// caller names who signed the request (function URLs with AWS_IAM auth pass the IAM identity),
// for the log.
func caller(req events.LambdaFunctionURLRequest) slog.Attr {
	if iam := req.RequestContext.Authorizer; iam != nil && iam.IAM != nil && iam.IAM.UserARN != "" {
		return slog.String("caller", iam.IAM.UserARN)
	}
	return slog.String("caller", "")
}

func (a *API) enqueue(ctx context.Context, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return badRequest("the body is not valid base64")
		}
		body = b
	}
	if len(body) > maxBodyBytes {
		return reply(http.StatusRequestEntityTooLarge, errorResponse{Error: fmt.Sprintf("the body is %d bytes, above the limit of %d", len(body), maxBodyBytes)})
	}
	if ct := header(req.Headers, "content-type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return reply(http.StatusUnsupportedMediaType, errorResponse{Error: fmt.Sprintf("content-type %q: send application/json", ct)})
	}
	if nestedDeeper(body, maxBodyDepth) {
		return badRequest(fmt.Sprintf(`the body nests arrays and objects more than %d levels deep: "args" may nest at most %d (the args object is the first)`, maxBodyDepth, maxArgsDepth))
	}
	var in enqueueRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return badRequest(fmt.Sprintf(`the body is not a job: %v (want {"kind":"email.send","args":{…},"delay":"30s"})`, err))
	}
	if dec.More() {
		return badRequest("the body has data after the JSON object")
	}
	if in.Kind == "" {
		return badRequest(`"kind" is required`)
	}
	if err := jobs.ValidateKind(in.Kind); err != nil {
		return badRequest(fmt.Sprintf(`"kind": %v`, err))
	}
	rule := a.Policy.rule(in.Kind)
	if rule == nil {
		a.logger().WarnContext(ctx, "api: kind not allowed", slog.String("kind", in.Kind), caller(req))
		return reply(http.StatusForbidden, errorResponse{Error: fmt.Sprintf("kind %q may not be enqueued through this API: it is not on its allow-list (SQSWORKER_API_KINDS)", in.Kind)})
	}
	if len(in.Args) == 0 || string(in.Args) == "null" {
		in.Args = json.RawMessage(`{}`)
	}
	if in.Args[0] != '{' {
		return badRequest(`"args" must be a JSON object, such as {"to":"a@b.c"}`)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, in.Args); err != nil { // not reached: the decoder checked it
		return badRequest(fmt.Sprintf(`"args": %v`, err))
	}
	args := compact.Bytes()
	if len(args) > rule.maxArgs {
		return reply(http.StatusRequestEntityTooLarge, errorResponse{Error: fmt.Sprintf("the args of %s are %d bytes (compacted JSON), above this kind's limit of %d", in.Kind, len(args), rule.maxArgs)})
	}
	if fields, err := rule.validate(args); err != nil {
		a.logger().ErrorContext(ctx, "api: schema validation failed", slog.String("kind", in.Kind), slog.Any("error", err))
		return reply(http.StatusInternalServerError, errorResponse{Error: "the args could not be validated"})
	} else if len(fields) > 0 {
		return reply(http.StatusBadRequest, errorResponse{
			Error:  fmt.Sprintf("the args do not match the schema of %s: %s", in.Kind, describe(fields)),
			Fields: fields,
		})
	}
	var opts []producer.Option
	var delay time.Duration
	if in.Delay != "" {
		d, err := time.ParseDuration(in.Delay)
		switch {
		case err != nil || d < 0:
			return badRequest(fmt.Sprintf(`"delay" %q is not a non-negative Go duration such as "30s" or "10m"`, in.Delay))
		case d > maxSQSDelay:
			return badRequest(fmt.Sprintf(`"delay" %s is above SQS's 15-minute maximum (this API sends no delay through a scheduler)`, d))
		case d > 0 && a.Producer.FIFO():
			return badRequest(`"delay": the queue is a FIFO queue, which takes no per-message delay (this API sends no delay through a scheduler)`)
		}
		opts = append(opts, producer.WithDelay(d))
		delay = d
	}
	if in.Group != "" {
		opts = append(opts, producer.WithGroupID(in.Group))
	}
	// The caller's principal scopes its keys and tags its job ids (caller.go).
	who := principal(req)
	if who != "" {
		opts = append(opts, producer.WithID(jobs.IDSource{Now: a.now}.NewID()+"-"+callerTag(who)))
	}
	key := header(req.Headers, "idempotency-key")
	if key != "" {
		if room := producer.MaxKeyLength - len(who) - 1; who != "" && len(key) > room {
			return badRequest(fmt.Sprintf("Idempotency-Key is %d bytes long; the limit is %d for this caller (%d bytes, less the %d of its IAM principal, which scopes its keys)",
				len(key), room, producer.MaxKeyLength, len(who)+1))
		}
		opts = append(opts, producer.WithKey(scopedKey(who, key)))
	}
	if in.Unique != nil || in.Debounce != nil || in.Throttle != nil {
		return a.enqueueDeduped(ctx, req, in, rule, args, opts, who, key)
	}
	m, err := a.Producer.PrepareRaw(ctx, in.Kind, args, opts...)
	if err != nil {
		if errors.Is(err, producer.ErrInvalid) {
			return badRequest(err.Error())
		}
		a.logger().ErrorContext(ctx, "api: prepare failed", slog.String("kind", in.Kind), slog.Any("error", err))
		return reply(http.StatusInternalServerError, errorResponse{Error: "the job could not be built"})
	}
	shownKey := m.Key // what the caller sees: its own key, not the scoped one
	if key != "" {
		shownKey = key
	}
	if a.Reserver != nil {
		return a.enqueueReserved(ctx, req, m, shownKey, args, requestHash(in.Kind, args, delay, in.Group), opts)
	}
	return a.send(ctx, m, shownKey, nil)
}

// requestHash is what makes two POSTs the same request: the hex SHA-256 of the kind, the
// canonical args (jobs.PayloadHash: whitespace and key order do not count), the delay (as a
// duration: "30s" and "30000ms" are the same) and the group.
func requestHash(kind string, args []byte, delay time.Duration, group string) string {
	payload, err := jobs.PayloadHash(kind, args)
	if err != nil { // not reached: args are valid JSON
		payload = string(args)
	}
	h := sha256.New()
	fmt.Fprintf(h, "sqsworker-api-request/1\x00%s\x00%d\x00%s", payload, delay.Nanoseconds(), group)
	return hex.EncodeToString(h.Sum(nil))
}

// enqueueReserved reserves the job's key in the job table before the send: a key seen before
// with the same request gets the first job's answer (sent once more while that job is queued and
// not marked sent, since its first send may have been lost), any other request 409. shownKey
// is the key as the caller gave it (m.Key is scoped by its principal).
func (a *API) enqueueReserved(ctx context.Context, req events.LambdaFunctionURLRequest, m producer.Message, shownKey string, args []byte, reqHash string, opts []producer.Option) events.LambdaFunctionURLResponse {
	hash, err := jobs.PayloadHash(m.Kind, args)
	if err != nil { // not reached: args are valid JSON
		return badRequest(fmt.Sprintf(`"args": %v`, err))
	}
	rec, created, err := a.Reserver.ReserveQueued(ctx, status.QueuedJob{Kind: m.Kind, Key: m.Key, JobID: m.ID, PayloadHash: hash,
		RequestHash: reqHash, At: a.now()})
	if err != nil {
		a.logger().ErrorContext(ctx, "api: reserve the job key failed", slog.String("kind", m.Kind), slog.String("key", m.Key), slog.Any("error", err))
		return reply(http.StatusBadGateway, errorResponse{Error: "the job could not be enqueued; try again"})
	}
	if created {
		return a.send(ctx, m, shownKey, func() {
			if err := a.Reserver.ReleaseQueued(ctx, m.Kind, m.Key, m.ID); err != nil {
				a.logger().ErrorContext(ctx, "api: release the job key after a failed send failed: the key stays taken until its record expires",
					slog.String("kind", m.Kind), slog.String("key", m.Key), slog.String("job_id", m.ID), slog.Any("error", err))
			}
		})
	}
	switch {
	case rec.JobID == "":
		return reply(http.StatusConflict, errorResponse{Error: fmt.Sprintf("Idempotency-Key %q of %s names a record that is %s and belongs to no job: use another key", shownKey, m.Kind, rec.State)})
	case rec.RequestHash != "" && rec.RequestHash != reqHash,
		// A record that no request of this API reserved (the Go producer's, a worker's) knows
		// only the payload.
		rec.RequestHash == "" && rec.PayloadHash != "" && rec.PayloadHash != hash:
		a.logger().InfoContext(ctx, "api: Idempotency-Key reused with another request", slog.String("kind", m.Kind), slog.String("key", m.Key), caller(req))
		return reply(http.StatusConflict, errorResponse{Error: fmt.Sprintf("Idempotency-Key %q was already used for a %s job with another request (args, delay or group): "+
			"repeat the first request's body to get its answer, or use a new key for a new job", shownKey, m.Kind)})
	}
	first := enqueueResponse{ID: rec.JobID, Key: shownKey, StatusURL: "/jobs/" + rec.JobID}
	if rec.State == idempotency.StateQueued && rec.SentAt.IsZero() {
		// Not picked up yet, and no repeat has sent it: the first request's message may never
		// have reached SQS (a crash between the reservation and the send, a send whose answer
		// was lost, a release that failed after a failed send), so send the same job again, then
		// mark it sent so that later repeats send nothing. The worker's claim runs its key once,
		// whichever copy comes first.
		again, err := a.Producer.PrepareRaw(ctx, m.Kind, args, append(opts[:len(opts):len(opts)], producer.WithID(rec.JobID))...)
		if err != nil {
			a.logger().ErrorContext(ctx, "api: prepare the repeated job failed", slog.String("job_id", rec.JobID), slog.Any("error", err))
			return reply(http.StatusInternalServerError, errorResponse{Error: "the job could not be built"})
		}
		if resp := a.send(ctx, again, shownKey, nil); resp.StatusCode != http.StatusAccepted {
			return resp
		}
		if err := a.Reserver.MarkSent(ctx, m.Kind, rec.Key, rec.JobID, a.now()); err != nil {
			// The job is in the queue: answer as such; the next repeat sends it once more.
			a.logger().WarnContext(ctx, "api: mark the repeated job sent failed: a later repeat sends it again",
				slog.String("kind", m.Kind), slog.String("key", rec.Key), slog.String("job_id", rec.JobID), slog.Any("error", err))
		}
	}
	resp := reply(http.StatusAccepted, first)
	resp.Headers["Idempotent-Replayed"] = "true"
	return resp
}

// send sends one prepared job and answers 202 (with shownKey as the job's key), or calls failed
// (when not nil) and answers 400 (a job SQS refused as invalid) or 502.
func (a *API) send(ctx context.Context, m producer.Message, shownKey string, failed func()) events.LambdaFunctionURLResponse {
	results, err := a.Producer.Send(ctx, []producer.Message{m})
	if err == nil && len(results) == 1 {
		err = results[0].Err
	}
	if err != nil {
		if failed != nil {
			failed()
		}
		if errors.Is(err, producer.ErrInvalid) {
			return badRequest(err.Error())
		}
		a.logger().ErrorContext(ctx, "api: enqueue failed", slog.String("kind", m.Kind), slog.String("job_id", m.ID), slog.Any("error", err))
		return reply(http.StatusBadGateway, errorResponse{Error: "the job could not be enqueued; try again"})
	}
	return reply(http.StatusAccepted, enqueueResponse{ID: m.ID, Key: shownKey, StatusURL: "/jobs/" + m.ID})
}

// get answers GET /jobs/{id} for the caller who (with AWS_IAM auth) is principal, after waiting
// up to wait for the job's final state.
func (a *API) get(ctx context.Context, id, principal string, wait time.Duration) events.LambdaFunctionURLResponse {
	if a.Status == nil {
		return reply(http.StatusNotImplemented, errorResponse{Error: "job status is not configured: set SQSWORKER_TABLE"})
	}
	if id == "" {
		return badRequest("the job id is empty")
	}
	notFound := reply(http.StatusNotFound, errorResponse{Error: fmt.Sprintf("no job with id %q", id)})
	if !ownsID(principal, id) {
		// Another caller's job, or one enqueued elsewhere: none of this caller's business, and
		// answered as unknown without reading the table.
		return notFound
	}
	job, err := a.Status.GetByID(ctx, id)
	switch {
	case errors.Is(err, status.ErrNotFound):
		return notFound
	case errors.Is(err, status.ErrInvalid):
		return badRequest(err.Error())
	case err != nil:
		a.logger().ErrorContext(ctx, "status lookup failed", slog.String("job_id", id), slog.Any("error", err))
		return reply(http.StatusBadGateway, errorResponse{Error: "the job's status could not be read; try again"})
	}
	if !a.Policy.Allowed(job.Kind) {
		// Jobs of kinds this API does not enqueue are none of its callers' business: answered
		// as unknown, so that their existence does not show either.
		return notFound
	}
	if job.Lapsed() {
		// Expired while queued (or scheduled): a reservation released after its send failed, or
		// a job no worker ever picked up. It was never run and never will be: no such job.
		return notFound
	}
	if w, ok := a.Status.(Waiter); ok && wait > 0 && !status.Final(job.State) {
		var err error
		if job, err = waitFor(ctx, w, id, wait, job); err != nil {
			if errors.Is(err, status.ErrNotFound) {
				return notFound
			}
			a.logger().ErrorContext(ctx, "status wait failed", slog.String("job_id", id), slog.Any("error", err))
			return reply(http.StatusBadGateway, errorResponse{Error: "the job's status could not be read; try again"})
		}
	}
	out := jobResponse{
		ID: job.JobID, Kind: job.Kind, State: string(job.State), Attempts: job.Runs,
		FirstAttemptAt: stamp(job.FirstAttemptAt), LastAttemptAt: stamp(job.LastAttemptAt),
		UpdatedAt: stamp(job.UpdatedAt), ExpiresAt: stamp(job.ExpiresAt), RunAt: stamp(job.RunAt), Expired: job.Expired,
		CancelRequestedAt: stamp(job.CancelRequestedAt),
	}
	if p := job.Progress; !p.IsZero() {
		out.Progress = &progressResponse{Fraction: p.Fraction, At: stamp(p.At)}
		if a.ShowDetails {
			out.Progress.Message = p.Message
		}
	}
	if a.ShowDetails {
		out.Key, out.Reason, out.LastError = strings.TrimPrefix(job.Key, scopedKey(principal, "")), job.Reason, job.LastError
		if job.Result != "" {
			if json.Valid([]byte(job.Result)) {
				out.Result = json.RawMessage(job.Result)
			} else {
				out.Result, _ = json.Marshal(job.Result)
			}
		}
	}
	return reply(http.StatusOK, out)
}

// stamp formats t as RFC 3339 in UTC with milliseconds, or "" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// header returns the value of a header, case-insensitively (function URLs lower-case them).
func header(h map[string]string, name string) string {
	if v, ok := h[name]; ok {
		return strings.TrimSpace(v)
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func badRequest(msg string) events.LambdaFunctionURLResponse {
	return reply(http.StatusBadRequest, errorResponse{Error: msg})
}

func methodNotAllowed(allow string) events.LambdaFunctionURLResponse {
	r := reply(http.StatusMethodNotAllowed, errorResponse{Error: "method not allowed: use " + allow})
	r.Headers["Allow"] = allow
	return r
}

func reply(code int, v any) events.LambdaFunctionURLResponse {
	b, err := json.Marshal(v)
	if err != nil { // not reached: every body type marshals
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	return events.LambdaFunctionURLResponse{
		StatusCode: code,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(b),
	}
}
