package awslocal_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// freePort returns a loopback port nothing listens on (now).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestEmbeddedOnAChosenPort: with Options.Port the embedded emulator answers at
// http://localhost:PORT (also as 127.0.0.1, for programs that do not resolve localhost), the queue
// URLs it returns are made reachable there, and Close frees the port.
func TestEmbeddedOnAChosenPort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	port := freePort(t)
	b, err := awslocal.Start(ctx, awslocal.Options{Backend: awslocal.Embedded, Port: port})
	if errors.Is(err, awslocal.ErrPortInUse) {
		t.Skipf("another program took port %d meanwhile: %v", port, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := "http://localhost:" + strconv.Itoa(port)
	if b.URL != want {
		t.Errorf("URL = %q, want %q", b.URL, want)
	}
	name := awslocal.UniqueName("port")
	st, err := awslocal.Provision(ctx, sqs.NewFromConfig(b.Config), awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	printed := b.QueueURL(st.QueueURL)
	if !strings.HasPrefix(printed, want+"/") || !strings.HasSuffix(printed, "/"+awslocal.QueueName(name, false)) {
		t.Errorf("QueueURL(%q) = %q, want it under %s", st.QueueURL, printed, want)
	}
	// Another client, as another program would be, that knows only the printed URL.
	for _, endpoint := range []string{want, "http://127.0.0.1:" + strconv.Itoa(port)} {
		cfg := b.Config.Copy()
		cfg.BaseEndpoint = aws.String(endpoint)
		if _, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(printed)}); err != nil {
			t.Errorf("GetQueueAttributes at %s: %v", endpoint, err)
		}
	}
	b.Close()
	if c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Errorf("port %d still accepts connections after Close", port)
	}
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = awslocal.Start(context.Background(), awslocal.Options{Backend: awslocal.Embedded, Port: port})
	if !errors.Is(err, awslocal.ErrPortInUse) || !strings.Contains(err.Error(), "localhost:"+strconv.Itoa(port)) {
		t.Errorf("Start on a taken port = %v, want ErrPortInUse naming localhost:%d", err, port)
	}
	_, err = awslocal.Start(context.Background(), awslocal.Options{Backend: awslocal.Endpoint, Endpoint: "http://localhost:1", Port: port})
	if err == nil || !strings.Contains(err.Error(), "Options.Port is for the embedded emulator") {
		t.Errorf("Start of an endpoint with a port = %v", err)
	}
}

func TestQueueURLAt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ endpoint, queue, want string }{
		{"http://127.0.0.1:38211", "http://localhost:4566/000000000000/app-jobs", "http://127.0.0.1:38211/000000000000/app-jobs"},
		{"http://localhost:4566", "http://localhost:4566/000000000000/app-jobs", "http://localhost:4566/000000000000/app-jobs"},
		{"http://localhost:4566", "http://sqs.us-east-1.localhost.localstack.cloud:4566/000000000000/a", "http://localhost:4566/000000000000/a"},
		{"https://sqs.us-east-1.amazonaws.com", "https://sqs.us-east-1.amazonaws.com/123456789012/a", "https://sqs.us-east-1.amazonaws.com/123456789012/a"},
		{"http://proxy:8080", "https://sqs.us-east-1.amazonaws.com/123456789012/a", "https://sqs.us-east-1.amazonaws.com/123456789012/a"},
		{"", "http://localhost:4566/000000000000/a", "http://localhost:4566/000000000000/a"},
		{"http://localhost:4566", "not a url", "not a url"},
	} {
		if got := awslocal.QueueURLAt(tt.endpoint, tt.queue); got != tt.want {
			t.Errorf("QueueURLAt(%q, %q) = %q, want %q", tt.endpoint, tt.queue, got, tt.want)
		}
	}
}
