package dlq_test

// An in-memory SQS for what the emulator cannot do: move tasks, refused entries, exact rates.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsworker/sqsworker/pkg/dlq"
)

const (
	fakeSource = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	fakeDLQ    = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dlq"
)

func fakeARN(queueURL string) string {
	return "arn:aws:sqs:us-east-1:123456789012:" + dlq.QueueName(queueURL)
}

// apiError is an AWS API error as the SDK reports it.
type apiError struct{ code, msg string }

func (e *apiError) Error() string        { return "api error " + e.code + ": " + e.msg }
func (e *apiError) ErrorCode() string    { return e.code }
func (e *apiError) ErrorMessage() string { return e.msg }

type fakeMsg struct {
	id, body, handle string
	attrs            map[string]sqstypes.MessageAttributeValue
	sys              map[string]string
	hidden           bool
}

// fakeSQS keeps queues in memory. A received message stays hidden until its visibility is set to
// 0 or it is deleted (time does not pass).
type fakeSQS struct {
	mu      sync.Mutex
	queues  map[string][]*fakeMsg
	seq     int
	listErr error // ListMessageMoveTasks' answer
	moveErr error // StartMessageMoveTask's answer
	sendErr error // SendMessageBatch's answer
	refuse  func(body string) bool
	moves   []*sqs.StartMessageMoveTaskInput
	lists   int
	// Move tasks: each ListMessageMoveTasks moves step messages of every running task (1 when
	// 0), none while frozen; failAt and failReason make the next task fail.
	tasks      []*fakeTask
	started    int
	step       int
	frozen     bool
	failAt     int
	failReason string
	taskClock  time.Time
	sent       []sqstypes.SendMessageBatchRequestEntry // every entry the job queue accepted
	// onSent, when set, is called (with f locked) for every message the job queue accepted, as a
	// worker that dead-letters it again would be; it may add messages with putLocked.
	onSent func(f *fakeSQS, m *fakeMsg)
}

func newFakeSQS() *fakeSQS {
	return &fakeSQS{queues: map[string][]*fakeMsg{}, taskClock: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

func (f *fakeSQS) put(queueURL, body string, attrs map[string]sqstypes.MessageAttributeValue, sys map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.putLocked(queueURL, "", body, attrs, sys)
}

// putLocked adds a message (id "" makes a new one) to a queue; f must be locked.
func (f *fakeSQS) putLocked(queueURL, id, body string, attrs map[string]sqstypes.MessageAttributeValue, sys map[string]string) {
	f.seq++
	if id == "" {
		id = "m" + strconv.Itoa(f.seq)
	}
	f.queues[queueURL] = append(f.queues[queueURL], &fakeMsg{id: id, body: body, attrs: attrs, sys: sys})
}

// count returns the visible and hidden messages of a queue.
func (f *fakeSQS) count(queueURL string) (visible, hidden int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.queues[queueURL] {
		if m.hidden {
			hidden++
		} else {
			visible++
		}
	}
	return visible, hidden
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range f.queues[aws.ToString(in.QueueUrl)] {
		if m.hidden || len(out.Messages) == int(in.MaxNumberOfMessages) {
			continue
		}
		f.seq++
		m.handle, m.hidden = "h"+strconv.Itoa(f.seq), in.VisibilityTimeout > 0
		out.Messages = append(out.Messages, sqstypes.Message{
			MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.handle), Body: aws.String(m.body),
			MessageAttributes: m.attrs, Attributes: m.sys,
		})
	}
	return out, nil
}

func (f *fakeSQS) find(queueURL, handle string) *fakeMsg {
	for _, m := range f.queues[queueURL] {
		if m.handle == handle {
			return m
		}
	}
	return nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		m := f.find(aws.ToString(in.QueueUrl), aws.ToString(e.ReceiptHandle))
		if m == nil {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid")})
			continue
		}
		m.hidden = e.VisibilityTimeout > 0
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if f.refuse != nil && f.refuse(aws.ToString(e.MessageBody)) {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidMessageContents"), Message: aws.String("refused")})
			continue
		}
		f.seq++
		m := &fakeMsg{id: "m" + strconv.Itoa(f.seq), body: aws.ToString(e.MessageBody), attrs: e.MessageAttributes}
		f.queues[aws.ToString(in.QueueUrl)] = append(f.queues[aws.ToString(in.QueueUrl)], m)
		f.sent = append(f.sent, e)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(m.id)})
		if f.onSent != nil {
			f.onSent(f, m)
		}
	}
	return out, nil
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	url := aws.ToString(in.QueueUrl)
	for _, e := range in.Entries {
		m := f.find(url, aws.ToString(e.ReceiptHandle))
		if m == nil {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid")})
			continue
		}
		q := f.queues[url]
		for i := range q {
			if q[i] == m {
				f.queues[url] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"QueueArn":                    fakeARN(url),
		"ApproximateNumberOfMessages": strconv.Itoa(len(f.queues[url])),
	}}, nil
}

// fakeTask is a message move task of the fake, as SQS documents it: it counts the messages to
// move when it starts, moves them (here: step per ListMessageMoveTasks call) and ends COMPLETED,
// or FAILED (failAt), or CANCELLED after a cancel.
type fakeTask struct {
	handle, src, dst string // ARNs
	status           string
	moved, toMove    int
	rate             int32
	started          int64 // unix ms
	failAt           int   // > 0: fails with failReason once this many moved
	failReason       string
}

// queueByARN returns the URL of the fake queue whose ARN is arn ("" when there is none).
func queueByARN(arn string) string {
	for _, u := range []string{fakeDLQ, fakeSource} {
		if fakeARN(u) == arn {
			return u
		}
	}
	return ""
}

// alreadyRunningErr is StartMessageMoveTask's answer while a task runs on the source queue, as
// recorded against AWS.
var alreadyRunningErr = &smithy.GenericAPIError{Code: "InvalidParameterValue",
	Message: "There is already a task running. Only one active task is allowed for a source queue arn at a given time.", Fault: smithy.FaultClient}

func (f *fakeSQS) StartMessageMoveTask(_ context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves = append(f.moves, in)
	if f.moveErr != nil {
		return nil, f.moveErr
	}
	src := aws.ToString(in.SourceArn)
	for _, t := range f.tasks {
		if t.src == src && (t.status == dlq.MoveTaskRunning || t.status == dlq.MoveTaskCancelling) {
			return nil, fmt.Errorf("operation error SQS: StartMessageMoveTask: https response error StatusCode: 400: %w", alreadyRunningErr)
		}
	}
	f.started++
	t := &fakeTask{handle: "task-" + strconv.Itoa(f.started), src: src, dst: aws.ToString(in.DestinationArn), status: dlq.MoveTaskRunning,
		toMove: len(f.queues[queueByARN(src)]), rate: aws.ToInt32(in.MaxNumberOfMessagesPerSecond),
		started: f.taskClock.Add(time.Duration(f.started) * time.Second).UnixMilli(), failAt: f.failAt, failReason: f.failReason}
	f.tasks = append(f.tasks, t)
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: aws.String(t.handle)}, nil
}

// advance moves the running tasks on by one step (f locked).
func (f *fakeSQS) advance() {
	for _, t := range f.tasks {
		switch t.status {
		case dlq.MoveTaskCancelling:
			t.status = dlq.MoveTaskCancelled
		case dlq.MoveTaskRunning:
			if f.frozen {
				continue
			}
			from, to := queueByARN(t.src), queueByARN(t.dst)
			for n := 0; n < max(f.step, 1) && t.moved < t.toMove && len(f.queues[from]) > 0; n++ {
				if t.failAt > 0 && t.moved >= t.failAt {
					break
				}
				m := f.queues[from][0]
				f.queues[from] = f.queues[from][1:]
				f.queues[to] = append(f.queues[to], &fakeMsg{id: m.id, body: m.body, attrs: m.attrs})
				t.moved++
			}
			switch {
			case t.failAt > 0 && t.moved >= t.failAt:
				t.status = dlq.MoveTaskFailed
			case t.moved >= t.toMove || len(f.queues[from]) == 0:
				t.status = dlq.MoveTaskCompleted
			}
		}
	}
}

func (f *fakeSQS) ListMessageMoveTasks(_ context.Context, in *sqs.ListMessageMoveTasksInput, _ ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	if aws.ToString(in.SourceArn) == "" {
		return nil, &smithy.GenericAPIError{Code: "MissingParameter", Message: "SourceArn is required"}
	}
	f.advance()
	limit := int(aws.ToInt32(in.MaxResults))
	if limit == 0 {
		limit = 1 // SQS's default: the most recent task
	}
	out := &sqs.ListMessageMoveTasksOutput{}
	for i := len(f.tasks) - 1; i >= 0 && len(out.Results) < limit; i-- {
		t := f.tasks[i]
		if t.src != aws.ToString(in.SourceArn) {
			continue
		}
		r := sqstypes.ListMessageMoveTasksResultEntry{
			ApproximateNumberOfMessagesMoved: int64(t.moved), ApproximateNumberOfMessagesToMove: aws.Int64(int64(t.toMove)),
			SourceArn: aws.String(t.src), StartedTimestamp: t.started, Status: aws.String(t.status),
		}
		if t.dst != "" {
			r.DestinationArn = aws.String(t.dst)
		}
		if t.rate > 0 {
			r.MaxNumberOfMessagesPerSecond = aws.Int32(t.rate)
		}
		if t.status == dlq.MoveTaskRunning { // SQS gives the handle of running tasks only
			r.TaskHandle = aws.String(t.handle)
		}
		if t.status == dlq.MoveTaskFailed {
			r.FailureReason = aws.String(t.failReason)
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

// cancel asks the task with handle to stop, as CancelMessageMoveTask does.
func (f *fakeSQS) cancel(handle string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tasks {
		if t.handle == handle && t.status == dlq.MoveTaskRunning {
			t.status = dlq.MoveTaskCancelling
		}
	}
}

func (f *fakeSQS) PurgeQueue(_ context.Context, in *sqs.PurgeQueueInput, _ ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.queues, aws.ToString(in.QueueUrl))
	return &sqs.PurgeQueueOutput{}, nil
}

// fakeResetter records ResetForRedrive calls.
type fakeResetter struct {
	mu    sync.Mutex
	calls []string // "kind/key keep=<bool>"
	err   error
}

func (r *fakeResetter) ResetForRedrive(_ context.Context, kind, key string, keepRuns bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%s/%s keep=%v", kind, key, keepRuns))
	return r.err
}

func (r *fakeResetter) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// fakeClock is a Now and Sleep pair in which only Sleep moves time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

// seedFake puts jobs from..to-1 in the fake DLQ with their failure attribute and a tenant.
func seedFake(f *fakeSQS, from, to int, sys func(i int) map[string]string) {
	for i := from; i < to; i++ {
		env := envelope(i)
		attrs := failureAttr(env)
		attrs["tenant"] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("acme")}
		var s map[string]string
		if sys != nil {
			s = sys(i)
		}
		f.put(fakeDLQ, body(env), attrs, s)
	}
}

func newFakeDLQ(f *fakeSQS, mutate func(*dlq.Config)) (*dlq.DLQ, error) {
	cfg := dlq.Config{SQS: f, DLQURL: fakeDLQ, SourceURL: fakeSource, RatePerSecond: 1 << 20}
	if mutate != nil {
		mutate(&cfg)
	}
	return dlq.New(cfg)
}

func unsupportedErr(code string) error {
	return fmt.Errorf("operation error SQS: StartMessageMoveTask: %w", &apiError{code: code, msg: "The action is not valid"})
}
