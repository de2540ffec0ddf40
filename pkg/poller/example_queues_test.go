package poller_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// One Poller over two queues with strict priority: with both full, every message of critical is
// handled before the first of bulk.
func ExampleConfig_queues() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	set, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example")},
		queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	if err != nil {
		log.Fatal(err)
	}
	crit, _ := set.Get("critical")
	bulk, _ := set.Get("bulk")
	for i := range 3 { // bulk first: order of arrival does not matter, priority does
		for _, q := range []queues.Queue{bulk, crit} {
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL),
				MessageBody: aws.String(fmt.Sprintf("%s %d", q.Name, i))}); err != nil {
				log.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	var handled []string
	all := make(chan struct{})
	p, err := poller.New(poller.Config{
		SQS: client, Queues: []poller.Queue{{URL: crit.URL}, {URL: bulk.URL}}, Priority: poller.Strict,
		BatchSize: 1, WaitTime: time.Second, Logger: slog.New(slog.DiscardHandler),
		Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, strings.Fields(ev.Records[0].Body)[0])
			if len(handled) == 6 {
				close(all)
			}
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	<-all
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println(handled)
	// Output: [critical critical critical bulk bulk bulk]
}
