package main

// dlq redrive with an SQS message move task. The embedded emulator has none, so these tests put
// moveTaskSQS in front of it: an HTTP endpoint that answers StartMessageMoveTask and
// ListMessageMoveTasks as AWS documents them (the mover works on the emulator's queues with real
// receive, send and delete calls) and passes every other request on to the emulator.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// cliTask is a move task of moveTaskSQS.
type cliTask struct {
	handle, src, dst, status string // src and dst are ARNs
	moved, toMove            int
	rate                     int
	started                  int64
}

// moveTaskSQS answers the move-task actions itself and proxies the rest to the emulator.
type moveTaskSQS struct {
	t       *testing.T
	client  *sqs.Client // the emulator's
	proxy   http.Handler
	perList int // messages a running task moves per ListMessageMoveTasks
	frozen  atomic.Bool
	lists   atomic.Int32
	starts  atomic.Int32
	mu      sync.Mutex
	tasks   []*cliTask
}

func newMoveTaskSQS(t *testing.T, b *awslocal.Backend, perList int) (*moveTaskSQS, string) {
	t.Helper()
	target, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	m := &moveTaskSQS{t: t, client: sqs.NewFromConfig(b.Config), proxy: httputil.NewSingleHostReverseProxy(target), perList: perList}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

func (m *moveTaskSQS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Header.Get("X-Amz-Target") {
	case "AmazonSQS.StartMessageMoveTask":
		m.start(w, r)
	case "AmazonSQS.ListMessageMoveTasks":
		m.list(w, r)
	default:
		m.proxy.ServeHTTP(w, r)
	}
}

func (m *moveTaskSQS) queueURL(ctx context.Context, arn string) (string, error) {
	out, err := m.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(arn[strings.LastIndex(arn, ":")+1:])})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.QueueUrl), nil
}

func writeAWSJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// awsError answers an SQS JSON error as AWS does (the query-compatible code in a header).
func awsError(w http.ResponseWriter, code int, queryCode, msg string) {
	w.Header().Set("x-amzn-query-error", queryCode+";Sender")
	writeAWSJSON(w, code, map[string]string{"__type": "com.amazonaws.sqs#" + queryCode, "message": msg})
}

func (m *moveTaskSQS) start(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SourceArn, DestinationArn    string
		MaxNumberOfMessagesPerSecond int
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		awsError(w, 400, "MalformedInput", err.Error())
		return
	}
	m.starts.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tasks {
		if t.src == in.SourceArn && t.status == "RUNNING" {
			awsError(w, 400, "InvalidParameterValue", "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
			return
		}
	}
	src, err := m.queueURL(r.Context(), in.SourceArn)
	if err != nil {
		awsError(w, 404, "ResourceNotFoundException", "The resource that you specified for the SourceArn parameter doesn't exist.")
		return
	}
	attrs, err := m.client.GetQueueAttributes(r.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(src),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		awsError(w, 500, "InternalError", err.Error())
		return
	}
	n := 0
	for _, v := range attrs.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	t := &cliTask{handle: fmt.Sprintf("AQEB-task-%d", len(m.tasks)+1), src: in.SourceArn, dst: in.DestinationArn, status: "RUNNING",
		toMove: n, rate: in.MaxNumberOfMessagesPerSecond, started: time.Now().UnixMilli()}
	m.tasks = append(m.tasks, t)
	writeAWSJSON(w, 200, map[string]string{"TaskHandle": t.handle})
}

// advance moves up to perList messages of a running task (m locked).
func (m *moveTaskSQS) advance(ctx context.Context, t *cliTask) error {
	src, err := m.queueURL(ctx, t.src)
	if err != nil {
		return err
	}
	dst, err := m.queueURL(ctx, t.dst)
	if err != nil {
		return err
	}
	out, err := m.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(src), MaxNumberOfMessages: int32(min(m.perList, t.toMove-t.moved, 10)),
		VisibilityTimeout: 30, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
	if err != nil {
		return err
	}
	for _, msg := range out.Messages {
		if _, err := m.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dst), MessageBody: msg.Body, MessageAttributes: msg.MessageAttributes}); err != nil {
			return err
		}
		if _, err := m.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(src), ReceiptHandle: msg.ReceiptHandle}); err != nil {
			return err
		}
		t.moved++
	}
	if t.moved >= t.toMove || len(out.Messages) == 0 {
		t.status = "COMPLETED"
	}
	return nil
}

func (m *moveTaskSQS) list(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SourceArn  string
		MaxResults int
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.SourceArn == "" {
		awsError(w, 400, "MissingParameter", "The request must contain the parameter SourceArn.")
		return
	}
	m.lists.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if in.MaxResults == 0 {
		in.MaxResults = 1
	}
	type entry struct {
		ApproximateNumberOfMessagesMoved  int
		ApproximateNumberOfMessagesToMove int
		DestinationArn                    string `json:",omitempty"`
		MaxNumberOfMessagesPerSecond      int    `json:",omitempty"`
		SourceArn                         string
		StartedTimestamp                  int64
		Status                            string
		TaskHandle                        string `json:",omitempty"`
	}
	results := []entry{}
	for i := len(m.tasks) - 1; i >= 0 && len(results) < in.MaxResults; i-- {
		t := m.tasks[i]
		if t.src != in.SourceArn {
			continue
		}
		if t.status == "RUNNING" && !m.frozen.Load() {
			if err := m.advance(r.Context(), t); err != nil {
				awsError(w, 500, "InternalError", err.Error())
				return
			}
		}
		e := entry{ApproximateNumberOfMessagesMoved: t.moved, ApproximateNumberOfMessagesToMove: t.toMove, DestinationArn: t.dst,
			MaxNumberOfMessagesPerSecond: t.rate, SourceArn: t.src, StartedTimestamp: t.started, Status: t.status}
		if t.status == "RUNNING" { // SQS gives the handle of running tasks only
			e.TaskHandle = t.handle
		}
		results = append(results, e)
	}
	writeAWSJSON(w, 200, map[string]any{"Results": results})
}

// seedDLQ sends n dead letters (job-00…) to the stack's DLQ and returns the queue URLs.
func seedDLQ(t *testing.T, client *sqs.Client, stack string, n int) (queueURL, dlqURL string) {
	t.Helper()
	ctx := context.Background()
	urlOf := func(name string) string {
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl)
	}
	queueURL, dlqURL = urlOf(awslocal.QueueName(stack, false)), urlOf(awslocal.DLQName(stack, false))
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range n {
		entries = append(entries, deadLetter("email.send", fmt.Sprintf("job-%02d", i), nil))
	}
	if out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(dlqURL), Entries: entries}); err != nil || len(out.Failed) > 0 {
		t.Fatalf("seed the DLQ: %v %+v", err, out)
	}
	return queueURL, dlqURL
}

// TestDLQRedriveFollowsTheMoveTask: on a backend with move tasks, redrive starts one and follows
// it until SQS says COMPLETED, then says what it moved; every dead letter is then in the job
// queue once.
func TestDLQRedriveFollowsTheMoveTask(t *testing.T) {
	t.Parallel()
	const n = 6
	stack := newStack(t, "mtask", false)
	b := backend(t)
	client := sqs.NewFromConfig(b.Config)
	queueURL, dlqURL := seedDLQ(t, client, stack, n)
	mt, endpoint := newMoveTaskSQS(t, b, 3)

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"dlq", "redrive", "--stack", stack, "--endpoint", endpoint}, &stdout, &stderr); code != exitOK {
		t.Fatalf("redrive: exit %d, stderr %q", code, stderr.String())
	}
	want := fmt.Sprintf("redrove about %d of %d messages from %s to %s (an SQS message move task; dead letters that arrived after it started wait for the next redrive)\n",
		n, n, awslocal.DLQName(stack, false), awslocal.QueueName(stack, false))
	if stdout.String() != want || stderr.Len() != 0 {
		t.Errorf("stdout %q, stderr %q; want %q", stdout.String(), stderr.String(), want)
	}
	if got := mt.starts.Load(); got != 1 {
		t.Errorf("%d StartMessageMoveTask calls, want 1", got)
	}
	if lists := mt.lists.Load(); lists < 3 { // the probe, then a poll per step of 3
		t.Errorf("%d ListMessageMoveTasks calls: the command did not follow the task", lists)
	}
	ids := drainJobIDs(t, client, queueURL)
	for i := range n {
		if id := fmt.Sprintf("job-%02d", i); ids[id] != 1 {
			t.Errorf("job %s is %d times in the job queue, want once (all: %v)", id, ids[id], ids)
		}
	}
	if left := queueCount(t, client, dlqURL); left != 0 {
		t.Errorf("%d messages left in the DLQ", left)
	}
}

// TestDLQRedriveMoveTaskInterrupted: Ctrl-C while redrive follows a move task says that the task
// keeps running in SQS, what it moved so far, its handle and how to cancel it, and that running
// the command again is safe; running it again follows that task (SQS refuses a second one) to
// its end.
func TestDLQRedriveMoveTaskInterrupted(t *testing.T) {
	t.Parallel()
	const n = 6
	stack := newStack(t, "mtint", false)
	b := backend(t)
	client := sqs.NewFromConfig(b.Config)
	queueURL, dlqURL := seedDLQ(t, client, stack, n)
	mt, endpoint := newMoveTaskSQS(t, b, 2)
	mt.frozen.Store(true)

	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"dlq", "redrive", "--stack", stack, "--endpoint", endpoint}, &stdout, &stderr)
	}()
	// The probe, then the first poll of the started task.
	waitFor(t, 60*time.Second, "redrive follows the move task", func() bool { return mt.starts.Load() == 1 && mt.lists.Load() >= 2 })
	mt.frozen.Store(false) // the final read after the interrupt sees it move on: 2 moved
	interrupt()
	var got int
	select {
	case got = <-code:
	case <-time.After(60 * time.Second):
		t.Fatal("the interrupted redrive did not return")
	}
	dlqName, queueName := awslocal.DLQName(stack, false), awslocal.QueueName(stack, false)
	re := regexp.MustCompile(`^sqsworker: redrive interrupted: the message move task keeps running in SQS; it had moved about (\d) of 6 messages from ` +
		regexp.QuoteMeta(dlqName) + ` to ` + regexp.QuoteMeta(queueName) + `\n` +
		`  task handle  (AQEB-task-1)\n` +
		`  to stop it:  aws sqs cancel-message-move-task --task-handle AQEB-task-1 --endpoint-url ` + regexp.QuoteMeta(endpoint) + `\n` +
		`  running the same command again is safe: it follows the running task \(SQS runs one per queue\) instead of starting another\n$`)
	m := re.FindStringSubmatch(stderr.String())
	if got != exitError || m == nil || stdout.Len() != 0 {
		t.Fatalf("interrupted redrive: exit %d, stdout %q, stderr %q; want exit 1 and the move task's message", got, stdout.String(), stderr.String())
	}
	if m[1] != "2" {
		t.Errorf("interrupted after %s moved, want 2 (the final read's)", m[1])
	}

	// Running it again follows the task to its end, and starts none.
	stdout.Reset()
	stderr.Reset()
	if got := run(context.Background(), []string{"dlq", "redrive", "--stack", stack, "--endpoint", endpoint, "-o", "json"}, &stdout, &stderr); got != exitOK {
		t.Fatalf("second redrive: exit %d: %s", got, stderr.String())
	}
	var doc redriveJSON
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || !doc.Attached || doc.Status != "COMPLETED" || doc.Moved != n || doc.Total != n ||
		doc.TaskHandle != "AQEB-task-1" || doc.Method != "move-task" {
		t.Fatalf("second redrive = %s (%v); want the running task followed to COMPLETED, %d moved", stdout.String(), err, n)
	}
	if want := "a message move task started earlier is running on " + dlqName + " (SQS runs one per queue): following it\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	if got := mt.starts.Load(); got != 1 {
		t.Errorf("%d StartMessageMoveTask calls, want 1", got)
	}
	ids := drainJobIDs(t, client, queueURL)
	for i := range n {
		if id := fmt.Sprintf("job-%02d", i); ids[id] != 1 {
			t.Errorf("job %s is %d times in the job queue, want once (all: %v)", id, ids[id], ids)
		}
	}
	if left := queueCount(t, client, dlqURL); left != 0 {
		t.Errorf("%d messages left in the DLQ", left)
	}
}
