package decoders

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/aws/aws-lambda-go/events"
	gojson "github.com/goccy/go-json"
	"github.com/valyala/fastjson"

	"github.com/sqsworker/sqsworker/internal/sqsevent"
)

// The generator is a copy of internal/sqsevent/bench_test.go's, so both measure the same bytes.

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

// fastjsonDecoder reads the fields a worker needs with a reused parser. The records' strings
// alias the parser's memory: they are valid only until the next Parse, unlike the others'.
type fastjsonDecoder struct {
	p    fastjson.Parser
	recs []sqsevent.Record
}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (d *fastjsonDecoder) decode(payload []byte) ([]sqsevent.Record, error) {
	v, err := d.p.ParseBytes(payload)
	if err != nil {
		return nil, err
	}
	d.recs = d.recs[:0]
	for _, m := range v.GetArray("Records") {
		r := sqsevent.Record{
			MessageID:      b2s(m.GetStringBytes("messageId")),
			ReceiptHandle:  b2s(m.GetStringBytes("receiptHandle")),
			Body:           b2s(m.GetStringBytes("body")),
			MD5OfBody:      b2s(m.GetStringBytes("md5OfBody")),
			EventSourceARN: b2s(m.GetStringBytes("eventSourceARN")),
			AWSRegion:      b2s(m.GetStringBytes("awsRegion")),
		}
		if a := m.GetObject("attributes"); a != nil {
			a.Visit(func(k []byte, v *fastjson.Value) {
				s := b2s(v.GetStringBytes())
				switch b2s(k) {
				case "ApproximateReceiveCount":
					r.ApproximateReceiveCount, _ = strconv.Atoi(s)
				case "SentTimestamp":
					r.SentTimestamp, _ = strconv.ParseInt(s, 10, 64)
				case "ApproximateFirstReceiveTimestamp":
					r.ApproximateFirstReceiveTimestamp, _ = strconv.ParseInt(s, 10, 64)
				case "SenderId":
					r.SenderID = s
				case "MessageGroupId":
					r.MessageGroupID = s
				case "MessageDeduplicationId":
					r.MessageDeduplicationID = s
				case "SequenceNumber":
					r.SequenceNumber = s
				case "AWSTraceHeader":
					r.AWSTraceHeader = s
				}
			})
		}
		d.recs = append(d.recs, r)
	}
	return d.recs, nil
}

// BenchmarkDecoders decodes the same Lambda SQS events into []sqsevent.Record with each decoder.
// B/op and allocs/op are per event of n records.
func BenchmarkDecoders(b *testing.B) {
	for _, n := range benchSizes {
		payload := lambdaEvent(n, eventOptions{})
		run := func(name string, decode func([]byte) ([]sqsevent.Record, error)) {
			b.Run(fmt.Sprintf("records=%d/%s", n, name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					recs, err := decode(payload)
					if err != nil || len(recs) != n {
						b.Fatal(len(recs), err)
					}
				}
				reportPerRecord(b, n)
			})
		}
		run("encoding_json", func(p []byte) ([]sqsevent.Record, error) {
			var ev events.SQSEvent
			err := json.Unmarshal(p, &ev)
			return sqsevent.FromEvent(ev, nil), err
		})
		run("goccy_go-json", func(p []byte) ([]sqsevent.Record, error) {
			var ev events.SQSEvent
			err := gojson.Unmarshal(p, &ev)
			return sqsevent.FromEvent(ev, nil), err
		})
		var fj fastjsonDecoder
		run("fastjson_reused", fj.decode)
		run("sqsevent", sqsevent.Decode)
	}
}

// TestDecodersAgree checks that every decoder reads the benchmark events the same way.
func TestDecodersAgree(t *testing.T) {
	payload := lambdaEvent(50, eventOptions{fifo: true, trace: true})
	want, err := sqsevent.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	var fj fastjsonDecoder
	for name, decode := range map[string]func([]byte) ([]sqsevent.Record, error){
		"encoding_json": func(p []byte) ([]sqsevent.Record, error) {
			var ev events.SQSEvent
			err := json.Unmarshal(p, &ev)
			return sqsevent.FromEvent(ev, nil), err
		},
		"goccy_go-json": func(p []byte) ([]sqsevent.Record, error) {
			var ev events.SQSEvent
			err := gojson.Unmarshal(p, &ev)
			return sqsevent.FromEvent(ev, nil), err
		},
		"fastjson_reused": fj.decode,
	} {
		got, err := decode(payload)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d records, %v", name, len(got), err)
		}
		for i := range got {
			g, w := got[i], want[i]
			g.RawMessageAttributes, g.Attrs, w.RawMessageAttributes, w.Attrs = "", nil, "", nil
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s: record %d = %+v, want %+v", name, i, g, w)
			}
		}
	}
}
