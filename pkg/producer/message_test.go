package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

func TestPrepareBuildsWhatEnqueueSends(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL)
	attrs := map[string]types.MessageAttributeValue{"tenant": strAttr("acme")}
	opts := []Option{WithID("job-1"), WithKey("k-1"), WithAttributes(attrs), WithMaxAttempts(3)}
	m, err := p.Prepare(context.Background(), emailArgs{To: "a@b.c"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if len(api.sendCalls())+len(api.batchCalls()) != 0 {
		t.Fatal("Prepare called SQS")
	}
	if _, err := p.Enqueue(context.Background(), emailArgs{To: "a@b.c"}, opts...); err != nil {
		t.Fatal(err)
	}
	sent := api.sendCalls()[0]
	if m.Body != sent.Body || m.ID != "job-1" || m.Kind != "email.send" || m.Key != "k-1" || m.QueueURL != stdURL {
		t.Errorf("Prepare = %+v\nEnqueue sent body %s", m, sent.Body)
	}
	if m.Size() != sent.size() {
		t.Errorf("Size() = %d, SQS counts %d", m.Size(), sent.size())
	}
	if !m.RunAt.IsZero() || m.GroupID != "" || m.DeduplicationID != "" {
		t.Errorf("undelayed standard job: RunAt %v group %q dedup %q", m.RunAt, m.GroupID, m.DeduplicationID)
	}
	hash, err := m.PayloadHash()
	want, _ := jobs.PayloadHash("email.send", []byte(`{"to":"a@b.c"}`))
	if err != nil || hash != want {
		t.Errorf("PayloadHash = %q, %v; want %q", hash, err, want)
	}
}

func TestPrepareKeepsDelaysAsRunAt(t *testing.T) {
	t.Parallel()
	p := newTestProducer(t, &fakeSQS{}, stdURL) // no scheduler: Prepare accepts long delays all the same
	for _, d := range []time.Duration{time.Second, 15 * time.Minute, 48 * time.Hour} {
		m, err := p.Prepare(context.Background(), emailArgs{To: "a"}, WithDelay(d))
		if err != nil {
			t.Fatalf("delay %v: %v", d, err)
		}
		if !m.RunAt.Equal(fixedNow.Add(d)) {
			t.Errorf("delay %v: RunAt %v, want %v", d, m.RunAt, fixedNow.Add(d))
		}
	}
	at := fixedNow.Add(time.Hour)
	if m, err := p.Prepare(context.Background(), emailArgs{To: "a"}, WithRunAt(at)); err != nil || !m.RunAt.Equal(at) {
		t.Errorf("WithRunAt: %v, %v", m.RunAt, err)
	}
	f := newTestProducer(t, &fakeSQS{}, fifoURL)
	m, err := f.Prepare(context.Background(), emailArgs{To: "a"}, WithGroupID("g"), WithDelay(time.Minute))
	if err != nil || m.GroupID != "g" || m.DeduplicationID == "" || !m.RunAt.Equal(fixedNow.Add(time.Minute)) {
		t.Errorf("FIFO Prepare = %+v, %v", m, err)
	}
}

func TestPrepareRejectsWhatEnqueueRejects(t *testing.T) {
	t.Parallel()
	p := newTestProducer(t, &fakeSQS{}, stdURL)
	_, err := p.Prepare(context.Background(), badKindArgs{})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("bad kind: %v", err)
	}
	_, err = p.Prepare(context.Background(), emailArgs{To: "a"}, WithDelay(-time.Second))
	mustContain(t, err, "producer: prepare email.send", "delay -1s is negative")
	_, err = p.PrepareRaw(context.Background(), "email.send", json.RawMessage(`[1]`))
	mustContain(t, err, "producer: prepare email.send", "args are a JSON array")
	m, err := p.PrepareRaw(context.Background(), "email.send", json.RawMessage(` {"to": "x"} `))
	if err != nil || !strings.Contains(m.Body, `"args":{"to":"x"}`) {
		t.Errorf("PrepareRaw = %q, %v", m.Body, err)
	}
}

func TestSendSendsPreparedMessages(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	st := &fakeStatus{}
	sched := &fakeScheduler{}
	now := fixedNow
	p := newTestProducer(t, api, stdURL, func(c *Config) {
		c.Status, c.Scheduler = st, sched
		c.Clock = func() time.Time { return now }
	})
	var msgs []Message
	for i, d := range []time.Duration{0, 10 * time.Second, time.Hour, 12 * time.Minute} {
		m, err := p.Prepare(context.Background(), emailArgs{To: fmt.Sprint(i)}, WithDelay(d))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	now = fixedNow.Add(5 * time.Minute) // sent later, as a relay does: what is left of each delay
	res, err := p.Send(context.Background(), msgs)
	if err != nil || JoinErrors(res) != nil {
		t.Fatalf("Send: %v, %v", err, JoinErrors(res))
	}
	calls := api.batchCalls()
	if len(calls) != 1 || len(calls[0]) != 3 {
		t.Fatalf("batch calls %+v, want one of 3 entries", calls)
	}
	// 10 s is already over; 12 min has 7 left (420 s); 1 h is scheduled.
	if d := []int32{calls[0][0].Delay, calls[0][1].Delay, calls[0][2].Delay}; d[0] != 0 || d[1] != 0 || d[2] != 420 {
		t.Errorf("delays %v, want [0 0 420]", d)
	}
	for i, c := range calls[0] {
		if c.Body != msgs[[]int{0, 1, 3}[i]].Body {
			t.Errorf("entry %d body %s", i, c.Body)
		}
	}
	if len(sched.scheduled) != 1 || sched.scheduled[0].env.ID != msgs[2].ID || !sched.scheduled[0].runAt.Equal(msgs[2].RunAt) {
		t.Errorf("scheduled %+v", sched.scheduled)
	}
	if res[2].Schedule == "" || res[0].MessageID == "" || res[3].MessageID == "" {
		t.Errorf("results %+v", res)
	}
	if len(st.queued) != 3 {
		t.Errorf("queued records %v, want 3", st.queued)
	}
}

func TestSendValidatesStoredMessages(t *testing.T) {
	t.Parallel()
	p := newTestProducer(t, &fakeSQS{}, stdURL)
	good, err := p.Prepare(context.Background(), emailArgs{To: "a"}, WithID("good"))
	if err != nil {
		t.Fatal(err)
	}
	noSched := good
	noSched.RunAt = fixedNow.Add(time.Hour)
	tests := []struct {
		name string
		edit func(m *Message)
		want string
	}{
		{"other queue", func(m *Message) { m.QueueURL = stdURL + "-2" }, "this producer sends to"},
		{"not an envelope", func(m *Message) { m.Body = "hello" }, "the body is not a job envelope"},
		{"id mismatch", func(m *Message) { m.ID = "other" }, `the envelope's id "good" is not the message's id "other"`},
		{"kind mismatch", func(m *Message) { m.Kind = "other.kind" }, "is not the message's kind"},
		{"too large", func(m *Message) {
			m.Attributes = map[string]types.MessageAttributeValue{"big": strAttr(strings.Repeat("x", MaxMessageSize))}
		}, "above the limit"},
		{"bad attribute", func(m *Message) {
			m.Attributes = map[string]types.MessageAttributeValue{"sqsworker.x": strAttr("v")}
		}, "reserved"},
		{"dedup on standard", func(m *Message) { m.DeduplicationID = "d" }, "deduplication ids apply only to FIFO"},
		{"long delay, no scheduler", func(m *Message) { *m = noSched }, "EventBridge Scheduler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := good
			tt.edit(&m)
			res, err := p.Send(context.Background(), []Message{m})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if !errors.Is(res[0].Err, ErrInvalid) {
				t.Errorf("Err = %v, want ErrInvalid", res[0].Err)
			}
			mustContain(t, res[0].Err, tt.want)
		})
	}
}

func TestSendKeepsFIFOGroupOrder(t *testing.T) {
	t.Parallel()
	// SQS rejects a2 (the second message of group a): a3 must not be sent, b's go on.
	api := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		out := &sqs.SendMessageBatchOutput{}
		for _, e := range in.Entries {
			if strings.Contains(aws.ToString(e.MessageBody), `"to":"a2"`) {
				out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), SenderFault: true})
				continue
			}
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("m%d-%s", call, *e.Id))})
		}
		return out, nil
	}}
	p := newTestProducer(t, api, fifoURL)
	var msgs []Message
	for _, n := range []string{"a1", "b1", "a2", "b2", "a3", "b3"} {
		m, err := p.Prepare(context.Background(), emailArgs{To: n}, WithGroupID(n[:1]))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	res, err := p.Send(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "", "InvalidParameterValue", "", ErrGroupBlocked.Error(), ""} {
		got := ""
		if res[i].Err != nil {
			got = res[i].Err.Error()
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("message %d: err %q, want %q", i, got, want)
		}
	}
	if !errors.Is(res[4].Err, ErrGroupBlocked) {
		t.Errorf("a3: %v is not ErrGroupBlocked", res[4].Err)
	}
	// One message per group per request, in order.
	for _, call := range api.batchCalls() {
		seen := map[string]bool{}
		for _, e := range call {
			if seen[e.Group] {
				t.Errorf("request %+v has two messages of group %s", call, e.Group)
			}
			seen[e.Group] = true
			if strings.Contains(e.Body, `"to":"a3"`) {
				t.Error("a3 was sent after a2 failed")
			}
		}
	}
}
