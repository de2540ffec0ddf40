package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Deduper enqueues a job under a deduplication rule (pkg/dedup). *dedup.Enqueuer implements it.
type Deduper interface {
	EnqueueRaw(ctx context.Context, kind string, args json.RawMessage, rule dedup.Rule, opts ...producer.Option) (dedup.Result, error)
}

// uniqueRequest is POST /jobs's "unique": the job is unique by its kind and key for the window.
type uniqueRequest struct {
	Key    string   `json:"key"`
	Fields []string `json:"fields"`
	Window string   `json:"window"`
	// While is "any" (the default: the whole window) or "active" (until the job is over).
	While string `json:"while"`
}

// debounceRequest is POST /jobs's "debounce".
type debounceRequest struct {
	Key     string   `json:"key"`
	Fields  []string `json:"fields"`
	Period  string   `json:"period"`
	MaxWait string   `json:"max_wait"`
}

// throttleRequest is POST /jobs's "throttle".
type throttleRequest struct {
	Key    string   `json:"key"`
	Fields []string `json:"fields"`
	Limit  int      `json:"limit"`
	Period string   `json:"period"`
}

// dedupResponse is POST /jobs's answer for a job enqueued under a rule.
type dedupResponse struct {
	ID        string `json:"id"`
	Key       string `json:"key"`
	StatusURL string `json:"status_url"`
	// Outcome is enqueued, duplicate (the job of ID holds the key: nothing was sent) or
	// debounced (the job of ID runs at RunAt unless another enqueue of the key moves it).
	Outcome string `json:"outcome"`
	// RuleKey is the rule's key as the caller gave it or as derived from the args.
	RuleKey string `json:"rule_key,omitempty"`
	// State is the holding job's state when a duplicate was judged by its record.
	State  string `json:"state,omitempty"`
	RunAt  string `json:"run_at,omitempty"`
	Events int    `json:"events,omitempty"`
	// Count and Limit are a throttled key's enqueues in the period and its limit.
	Count int `json:"count,omitempty"`
	Limit int `json:"limit,omitempty"`
}

// throttledResponse is the 429 of an enqueue a throttle dropped.
type throttledResponse struct {
	Error   string `json:"error"`
	RetryAt string `json:"retry_at"`
}

// jsonWords turns the library's names of rule fields and producer options into the request's.
var jsonWords = strings.NewReplacer(
	"Unique.Window", `"unique.window"`, "Unique.Key", `"unique.key"`, "Unique.Fields", `"unique.fields"`, "Unique.States", `"unique.while"`,
	"Debounce.Period", `"debounce.period"`, "Debounce.MaxWait", `"debounce.max_wait"`, "Debounce.Key", `"debounce.key"`, "Debounce.Fields", `"debounce.fields"`,
	"Throttle.Limit", `"throttle.limit"`, "Throttle.Period", `"throttle.period"`, "Throttle.Key", `"throttle.key"`, "Throttle.Fields", `"throttle.fields"`,
	"producer.WithDelay or WithRunAt", `"delay"`, "Config.RecordTTL", "the record TTL", "Debounce with", `"debounce" with`,
	"Config.LocalScheduler with the local dispatcher", "an emulator",
)

// allows reports whether the kind's entry of SQSWORKER_API_DEDUP allows rule.
func (r *kindRule) allows(rule string) bool {
	for _, a := range r.dedup {
		if a == rule {
			return true
		}
	}
	return false
}

// enqueueDeduped enqueues a request that asks for a deduplication rule: allowed for its kind,
// with keys scoped by the caller's principal as Idempotency-Keys are (caller.go), so that one
// caller can neither hold nor learn another's.
func (a *API) enqueueDeduped(ctx context.Context, req events.LambdaFunctionURLRequest, in enqueueRequest, kr *kindRule, args []byte, opts []producer.Option, who, idemKey string) events.LambdaFunctionURLResponse {
	var asked []string
	if in.Unique != nil {
		asked = append(asked, config.RuleUnique)
	}
	if in.Debounce != nil {
		asked = append(asked, config.RuleDebounce)
	}
	if in.Throttle != nil {
		asked = append(asked, config.RuleThrottle)
	}
	name := asked[0]
	switch {
	case len(asked) > 1:
		return badRequest(fmt.Sprintf(`%q: choose one of "unique", "debounce" and "throttle"`, strings.Join(asked, `" and "`)))
	case idemKey != "":
		return badRequest(fmt.Sprintf(`Idempotency-Key cannot be combined with %q: a unique request is idempotent by its unique key; enqueue without the header`, name))
	case !kr.allows(name):
		a.logger().WarnContext(ctx, "api: rule not allowed", slog.String("kind", in.Kind), slog.String("rule", name), caller(req))
		return reply(http.StatusForbidden, errorResponse{Error: fmt.Sprintf("kind %q may not be enqueued with %q through this API: it is not on its allow-list (%s)", in.Kind, name, config.EnvAPIDedup)})
	case a.Dedup == nil:
		return reply(http.StatusNotImplemented, errorResponse{Error: "deduplication is not configured: set " + config.EnvAPIDedup + " and " + config.EnvTable})
	}
	var (
		rule   dedup.Rule
		key    string
		fields []string
		err    error
	)
	dur := func(field, s string, required bool) (time.Duration, error) {
		if s == "" {
			if required {
				return 0, fmt.Errorf(`"%s" is required: a Go duration such as "1h" or "2m"`, field)
			}
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf(`"%s" %q is not a Go duration such as "1h" or "2m"`, field, s)
		}
		return d, nil
	}
	switch name {
	case config.RuleUnique:
		u := dedup.Unique{}
		key, fields = in.Unique.Key, in.Unique.Fields
		if u.Window, err = dur("unique.window", in.Unique.Window, true); err != nil {
			return badRequest(err.Error())
		}
		switch in.Unique.While {
		case "", "any":
		case "active":
			u.States = dedup.WhileActive
		default:
			return badRequest(fmt.Sprintf(`"unique.while" %q: want "any" or "active"`, in.Unique.While))
		}
		rule = u
	case config.RuleDebounce:
		d := dedup.Debounce{}
		key, fields = in.Debounce.Key, in.Debounce.Fields
		if d.Period, err = dur("debounce.period", in.Debounce.Period, true); err != nil {
			return badRequest(err.Error())
		}
		if d.MaxWait, err = dur("debounce.max_wait", in.Debounce.MaxWait, false); err != nil {
			return badRequest(err.Error())
		}
		rule = d
	default:
		t := dedup.Throttle{Limit: in.Throttle.Limit}
		key, fields = in.Throttle.Key, in.Throttle.Fields
		if t.Period, err = dur("throttle.period", in.Throttle.Period, true); err != nil {
			return badRequest(err.Error())
		}
		rule = t
	}
	if key != "" && len(fields) > 0 {
		return badRequest(fmt.Sprintf(`"%s.key" and "%s.fields" are both set: give the key, or the args fields to derive it from`, name, name))
	}
	if key == "" && (len(fields) > 0 || name == config.RuleUnique) {
		if key, err = dedup.ArgsKey(in.Kind, args, fields); err != nil {
			return badRequest(jsonWords.Replace(strings.TrimPrefix(err.Error(), "dedup: ")))
		}
	}
	shown := key
	scoped := key
	if who != "" {
		scoped = scopedKey(who, key) // "<principal> " alone: the kind, for this caller
	}
	if len(scoped) > dedup.MaxKeyLength {
		return badRequest(fmt.Sprintf(`"%s.key" is %d bytes long; the limit is %d for this caller (%d bytes, less the %d of its IAM principal, which scopes its keys)`,
			name, len(key), dedup.MaxKeyLength-len(who)-1, dedup.MaxKeyLength, len(who)+1))
	}
	switch r := rule.(type) {
	case dedup.Unique:
		r.Key = scoped
		rule = r
	case dedup.Debounce:
		r.Key = scoped
		rule = r
	case dedup.Throttle:
		r.Key = scoped
		rule = r
	}
	res, err := a.Dedup.EnqueueRaw(ctx, in.Kind, json.RawMessage(args), rule, opts...)
	var te *dedup.ThrottledError
	switch {
	case errors.As(err, &te):
		resp := reply(http.StatusTooManyRequests, throttledResponse{
			Error:   fmt.Sprintf("throttled: the key reached its limit of %d %s jobs per %v; nothing was enqueued", te.Limit, in.Kind, te.Period),
			RetryAt: stamp(te.RetryAt),
		})
		resp.Headers["Retry-After"] = strconv.Itoa(int(math.Ceil(te.RetryAt.Sub(a.now()).Seconds())))
		return resp
	case errors.Is(err, dedup.ErrInvalid):
		return badRequest(jsonWords.Replace(strings.TrimPrefix(strings.TrimPrefix(err.Error(), "dedup: "), "producer: ")))
	case err != nil:
		a.logger().ErrorContext(ctx, "api: enqueue under a rule failed", slog.String("kind", in.Kind), slog.String("rule", name), slog.Any("error", err))
		return reply(http.StatusBadGateway, errorResponse{Error: "the job could not be enqueued; try again"})
	}
	out := dedupResponse{ID: res.ID, Key: res.Key, StatusURL: "/jobs/" + res.ID, Outcome: string(res.Outcome), RuleKey: shown,
		State: string(res.State), Events: res.Events, Count: res.Count, Limit: res.Limit}
	code := http.StatusAccepted
	switch res.Outcome {
	case dedup.Duplicate:
		code = http.StatusOK // nothing new was accepted: the holding job stands for this request
	case dedup.Debounced:
		out.RunAt = stamp(res.RunAt)
	}
	return reply(code, out)
}

// newDeduper builds the Enqueuer of the requests that ask for a rule: on the job table t, with
// the API's producer, and, when a kind allows debounce, the scheduler of cfg.Scheduler.
func newDeduper(awsCfg aws.Config, cfg config.API, prod *producer.Producer, t *status.Table) (*dedup.Enqueuer, error) {
	dcfg := dedup.Config{Producer: prod, DynamoDB: dynamodb.NewFromConfig(awsCfg, awsendpoint.DynamoDB(awsCfg)), Table: cfg.Table, Jobs: t}
	if s := cfg.Scheduler; s.ScheduleGroup != "" {
		sc, err := schedule.NewClient(schedule.Config{Scheduler: scheduler.NewFromConfig(awsCfg), Group: s.ScheduleGroup,
			QueueARN: s.QueueARN, RoleARN: s.RoleARN, DeadLetterARN: s.DLQARN})
		if err != nil {
			return nil, err
		}
		dcfg.Scheduler = sc
	}
	return dedup.New(dcfg)
}
