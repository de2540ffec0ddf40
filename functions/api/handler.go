package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Enqueuer sends a job known by its kind and JSON args. *producer.Producer implements it.
type Enqueuer interface {
	EnqueueRaw(ctx context.Context, kind string, args json.RawMessage, opts ...producer.Option) (producer.Result, error)
}

// StatusReader reads a job's record by its id. *status.Table implements it.
type StatusReader interface {
	GetByID(ctx context.Context, jobID string) (status.Job, error)
}

// API answers the function URL's requests: POST /jobs enqueues, GET /jobs/{id} reads a status.
type API struct {
	// Producer enqueues the jobs. Required.
	Producer Enqueuer
	// Status reads job records. Defaults to nil: GET /jobs/{id} answers 501.
	Status StatusReader
	// Logger receives server-side failures. Defaults to slog.Default().
	Logger *slog.Logger
}

// maxBodyBytes bounds a request body (SQS's own message limit is 1 MiB).
const maxBodyBytes = 1 << 20

// enqueueRequest is POST /jobs's body.
type enqueueRequest struct {
	Kind  string          `json:"kind"`
	Args  json.RawMessage `json:"args"`
	Delay string          `json:"delay"`
}

// enqueueResponse is POST /jobs's answer.
type enqueueResponse struct {
	ID        string `json:"id"`
	Key       string `json:"key"`
	StatusURL string `json:"status_url"`
}

// jobResponse is GET /jobs/{id}'s answer: the record without its claim internals.
type jobResponse struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	Key            string          `json:"key"`
	State          string          `json:"state"`
	Runs           int             `json:"runs"`
	Reason         string          `json:"reason,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	FirstAttemptAt string          `json:"first_attempt_at,omitempty"`
	LastAttemptAt  string          `json:"last_attempt_at,omitempty"`
	UpdatedAt      string          `json:"updated_at,omitempty"`
	ExpiresAt      string          `json:"expires_at,omitempty"`
	RunAt          string          `json:"run_at,omitempty"`
	Expired        bool            `json:"expired,omitempty"`
}

// errorResponse is every error's body.
type errorResponse struct {
	Error string `json:"error"`
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
		return a.get(ctx, path[len("/jobs/"):]), nil
	}
	return reply(http.StatusNotFound, errorResponse{Error: fmt.Sprintf("no route for %s %s: use POST /jobs or GET /jobs/{id}", method, path)}), nil
}

func (a *API) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
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
	var in enqueueRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
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
	if len(in.Args) == 0 || string(in.Args) == "null" {
		in.Args = json.RawMessage(`{}`)
	}
	var opts []producer.Option
	if in.Delay != "" {
		d, err := time.ParseDuration(in.Delay)
		if err != nil || d < 0 {
			return badRequest(fmt.Sprintf(`"delay" %q is not a non-negative Go duration such as "30s" or "10m"`, in.Delay))
		}
		opts = append(opts, producer.WithDelay(d))
	}
	if key := header(req.Headers, "idempotency-key"); key != "" {
		opts = append(opts, producer.WithKey(key))
	}
	res, err := a.Producer.EnqueueRaw(ctx, in.Kind, in.Args, opts...)
	if err != nil {
		if errors.Is(err, producer.ErrInvalid) {
			return badRequest(err.Error())
		}
		a.logger().ErrorContext(ctx, "enqueue failed", slog.String("kind", in.Kind), slog.Any("error", err))
		return reply(http.StatusBadGateway, errorResponse{Error: "the job could not be enqueued; try again"})
	}
	return reply(http.StatusAccepted, enqueueResponse{ID: res.ID, Key: res.Key, StatusURL: "/jobs/" + res.ID})
}

func (a *API) get(ctx context.Context, id string) events.LambdaFunctionURLResponse {
	if a.Status == nil {
		return reply(http.StatusNotImplemented, errorResponse{Error: "job status is not configured: set SQSWORKER_TABLE"})
	}
	if id == "" {
		return badRequest("the job id is empty")
	}
	job, err := a.Status.GetByID(ctx, id)
	switch {
	case errors.Is(err, status.ErrNotFound):
		return reply(http.StatusNotFound, errorResponse{Error: fmt.Sprintf("no job with id %q", id)})
	case errors.Is(err, status.ErrInvalid):
		return badRequest(err.Error())
	case err != nil:
		a.logger().ErrorContext(ctx, "status lookup failed", slog.String("job_id", id), slog.Any("error", err))
		return reply(http.StatusBadGateway, errorResponse{Error: "the job's status could not be read; try again"})
	}
	out := jobResponse{
		ID: job.JobID, Kind: job.Kind, Key: job.Key, State: string(job.State), Runs: job.Runs,
		Reason: job.Reason, LastError: job.LastError,
		FirstAttemptAt: stamp(job.FirstAttemptAt), LastAttemptAt: stamp(job.LastAttemptAt),
		UpdatedAt: stamp(job.UpdatedAt), ExpiresAt: stamp(job.ExpiresAt), RunAt: stamp(job.RunAt), Expired: job.Expired,
	}
	if job.Result != "" {
		if json.Valid([]byte(job.Result)) {
			out.Result = json.RawMessage(job.Result)
		} else {
			out.Result, _ = json.Marshal(job.Result)
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
