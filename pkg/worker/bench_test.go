package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

// benchPayload is a Lambda SQS event of n no-op jobs as the Lambda runtime delivers it: the
// keys in the order Lambda writes them (the decoder expects that order; encoding/json's order,
// which json.Marshal of an events.SQSEvent gives, costs it a few percent), each record about
// 1 KB (a 380-character receipt handle, four system attributes, an envelope body).
func benchPayload(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"Records":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		env := jobs.Envelope{V: 1, ID: jobs.NewID(), Kind: "noop", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
			EnqueuedAt: time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC)}
		body, _ := env.MarshalJSON()
		bodyJSON, _ := json.Marshal(string(body))
		fmt.Fprintf(&b, `{"messageId":"059f36b4-87a3-44ab-83d2-%012d","receiptHandle":"%s","body":%s,`+
			`"attributes":{"ApproximateReceiveCount":"1","SentTimestamp":"1764410400000","SenderId":"AIDAIENQZJOLO23YVJ4VO",`+
			`"ApproximateFirstReceiveTimestamp":"1764410400123"},"messageAttributes":{},`+
			`"md5OfBody":"e4e68fb7bd0e697a0ae8f1bb342846b3","eventSource":"aws:sqs",`+
			`"eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:jobs","awsRegion":"us-east-1"}`,
			i, benchReceiptHandle, bodyJSON)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// benchReceiptHandle is as long as a real receipt handle (380 characters).
const benchReceiptHandle = "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a/pYi2GNRfOLmC0aKZ9sHRpnODAdEX8tBcLkM2MRt9aT5GrTPAY82Nfv3Vp4VPJ4zDlMwvGPBChLhoQRHu4kCcZXT5PzEjG2RxEjWmHIZ1UTHBrgW3dZxSnjM39MjvWgkDmOoUDJbYt+GKqHQ8Mr8YK3jIqkbUBNyzD1uj26b9HNKGv+8A0jGwYE6Wew4Qq8ic44DfYs4OgwGcjRh4sgdyx2wGPT87Y2ViGvlS5vSq/lGWsROHeGV0gzaDMDUbJcyLSEYHJj+FOAjhC3GbWlgrFzM6hsVT+s+WN2XGBzgYwOMuB0eNGcijDBTVjKVFo28qmDkhrsMB5uOmuK1qTjMeuhKMuQLUHlSBfUk01FvdDhWnUDpqYSdUpBcSxw=="

func benchHandler(b *testing.B, logger *slog.Logger) *Handler {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[noopArgs](func(context.Context, *jobs.Job[noopArgs]) error { return nil }))
	h, err := New(Config{Registry: reg, SQS: newFakeSQS(), Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkInvoke measures the whole path the Lambda runtime drives: invoke payload bytes →
// decode → run n no-op jobs → response bytes. Success lines are logged at Debug: log=info is the
// default level (no line per success), log=debug writes a JSON line per job (to io.Discard, so
// this is the cost of formatting it).
func BenchmarkInvoke(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		payload := benchPayload(n)
		for _, lg := range []struct {
			name   string
			logger *slog.Logger
		}{
			{"log=info", slog.New(slog.NewJSONHandler(io.Discard, nil))},
			{"log=debug", slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		} {
			b.Run(fmt.Sprintf("records=%d/%s", n, lg.name), func(b *testing.B) {
				h := benchHandler(b, lg.logger)
				ctx := context.Background()
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					out, err := h.Invoke(ctx, payload)
					if err != nil || len(out) != len(`{"batchItemFailures":[]}`) {
						b.Fatalf("Invoke = %s, %v", out, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
			})
		}
	}
}

// BenchmarkHandleSQS is the same through lambda.Start(h.HandleSQS): aws-lambda-go decodes the
// event with encoding/json first.
func BenchmarkHandleSQS(b *testing.B) {
	for _, n := range []int{10, 1000} {
		payload := benchPayload(n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			h := benchHandler(b, slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var ev events.SQSEvent
				if err := json.Unmarshal(payload, &ev); err != nil {
					b.Fatal(err)
				}
				resp, err := h.HandleSQS(ctx, ev)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}
