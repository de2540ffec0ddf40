package sqsevent

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// eventOptions shape the records of a generated event.
type eventOptions struct {
	fifo      bool // MessageGroupId, MessageDeduplicationId, SequenceNumber
	trace     bool // AWSTraceHeader
	msgAttrs  bool // String, Number and Binary message attributes
	indent    bool // whitespace between tokens, as a pretty-printer writes
	bodyExtra string
}

// lambdaEvent builds a realistic Lambda SQS event of n records, the same for the same n and
// options: the bodies are envelopes of no-op jobs, the receipt handles as long as real ones.
func lambdaEvent(n int, o eventOptions) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	const hex = "0123456789abcdef"
	randStr := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	var sb strings.Builder
	sb.WriteString(`{"Records":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		id := randStr(hex, 8) + "-" + randStr(hex, 4) + "-4" + randStr(hex, 3) + "-a" + randStr(hex, 3) + "-" + randStr(hex, 12)
		body := fmt.Sprintf(`{"v":1,"id":"01JDQ3ZV5XG8K2M4N6P8%06d","kind":"noop","args":{"n":%d},"enqueued_at":"2026-11-29T10:00:00.123Z"%s}`,
			i, i, o.bodyExtra)
		bodyJSON, _ := json.Marshal(body)
		sent := 1764410400123 + int64(i)
		attrs := `"ApproximateReceiveCount":"1","SentTimestamp":"` + strconv.FormatInt(sent, 10) +
			`","SenderId":"AROAIWPX5BD2BHG722MW4:sender","ApproximateFirstReceiveTimestamp":"` +
			strconv.FormatInt(sent+7, 10) + `"`
		if o.fifo {
			attrs += `,"MessageGroupId":"tenant-` + strconv.Itoa(i%7) + `","MessageDeduplicationId":"` + randStr(hex, 64) +
				`","SequenceNumber":"1884095380` + fmt.Sprintf("%010d", i) + `00000"`
		}
		if o.trace {
			attrs += `,"AWSTraceHeader":"Root=1-` + randStr(hex, 8) + `-` + randStr(hex, 24) + `;Parent=` + randStr(hex, 16) + `;Sampled=1"`
		}
		msgAttrs := `{}`
		md5Attrs := `null`
		if o.msgAttrs {
			msgAttrs = `{"tenant":{"stringValue":"acme","stringListValues":[],"binaryListValues":[],"dataType":"String"},` +
				`"priority":{"stringValue":"` + strconv.Itoa(i%10) + `","stringListValues":[],"binaryListValues":[],"dataType":"Number"},` +
				`"blob":{"binaryValue":"AAEC/w==","stringListValues":[],"binaryListValues":[],"dataType":"Binary"}}`
			md5Attrs = `"` + randStr(hex, 32) + `"`
		}
		queue := "jobs"
		if o.fifo {
			queue = "jobs.fifo"
		}
		fmt.Fprintf(&sb, `{"messageId":"%s","receiptHandle":"AQEB%s","body":%s,"attributes":{%s},"messageAttributes":%s,`+
			`"md5OfMessageAttributes":%s,"md5OfBody":"%s","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:%s","awsRegion":"us-east-1"}`,
			id, randStr(b64, 380), bodyJSON, attrs, msgAttrs, md5Attrs, randStr(hex, 32), queue)
	}
	sb.WriteString(`]}`)
	if o.indent {
		var out strings.Builder
		var v any
		_ = json.Unmarshal([]byte(sb.String()), &v)
		b, _ := json.MarshalIndent(v, "", "  ")
		out.Write(b)
		return []byte(out.String())
	}
	return []byte(sb.String())
}

var benchSizes = []int{10, 100, 1000, 10000}

func reportPerRecord(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

// BenchmarkDecode measures Decode against encoding/json into events.SQSEvent (plus FromEvent,
// which is what using it would cost). B/op and allocs/op are per event: divide by the records.
func BenchmarkDecode(b *testing.B) {
	for _, n := range benchSizes {
		payload := lambdaEvent(n, eventOptions{})
		b.Run(fmt.Sprintf("records=%d/sqsevent", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				recs, err := Decode(payload)
				if err != nil || len(recs) != n {
					b.Fatal(len(recs), err)
				}
			}
			reportPerRecord(b, n)
		})
		b.Run(fmt.Sprintf("records=%d/encoding_json", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				var ev events.SQSEvent
				if err := json.Unmarshal(payload, &ev); err != nil || len(ev.Records) != n {
					b.Fatal(err)
				}
				_ = FromEvent(ev, nil)
			}
			reportPerRecord(b, n)
		})
	}
}

// BenchmarkDecodeSegments measures DecodeSegments split over 1 (Decode), 2 and 4 goroutines.
func BenchmarkDecodeSegments(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		payload := lambdaEvent(n, eventOptions{})
		for _, parts := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("records=%d/parts=%d", n, parts), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					segs, err := DecodeSegments(payload, parts)
					if err != nil || len(segs) != min(parts, len(payload)/MinSegmentBytes) && parts <= len(payload)/MinSegmentBytes {
						b.Fatal(len(segs), err)
					}
				}
				reportPerRecord(b, n)
			})
		}
	}
}
