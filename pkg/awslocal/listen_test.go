package awslocal_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	smithyhttp "github.com/aws/smithy-go/transport/http"

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
	if err == nil || !strings.Contains(err.Error(), "Options.Port and Options.Listen are for the embedded emulator") {
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

// TestEmbeddedAnswersOnlyThisMachine: the emulator served on a port (Options.Port, or
// Options.Listen on a free one) answers a request whose Host is not a loopback name (a DNS-
// rebinding page: "Host: evil.example") or that a browser sends for another site's page with
// 403 and the reason, and performs nothing of it; requests addressed to localhost, a name under
// it or a loopback address, with or without the port, are served.
func TestEmbeddedAnswersOnlyThisMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, opts := range []awslocal.Options{
		{Backend: awslocal.Embedded, Listen: true},
		{Backend: awslocal.Embedded, Port: freePort(t)},
	} {
		b, err := awslocal.Start(ctx, opts)
		if errors.Is(err, awslocal.ErrPortInUse) {
			t.Skipf("another program took port %d meanwhile: %v", opts.Port, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		u, err := url.Parse(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		port := u.Port()
		// SQS's CreateQueue as a page's script sends it once its own name resolves to 127.0.0.1
		// (same origin then: any header goes), unsigned: the emulator checks no signature.
		send := func(host string, header map[string]string, queue string) (int, string) {
			t.Helper()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+port+"/",
				strings.NewReader(`{"QueueName":"`+queue+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			req.Header.Set("Content-Type", "application/x-amz-json-1.0")
			req.Header.Set("X-Amz-Target", "AmazonSQS.CreateQueue")
			for k, v := range header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		client := sqs.NewFromConfig(b.Config)
		exists := func(queue string) bool {
			_, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
			return err == nil
		}
		for _, tt := range []struct {
			name   string
			host   string
			header map[string]string
			want   string // the refusal's code; "" when served (and the queue created), "S3" when S3 serves it
		}{
			{"rebinding page", "evil.example", nil, "HostNotAllowed"},
			{"rebinding page with port", "evil.example:" + port, nil, "HostNotAllowed"},
			{"name ending in localhost", "evillocalhost:" + port, nil, "HostNotAllowed"},
			{"localhost as a label", "localhost.evil.example:" + port, nil, "HostNotAllowed"},
			{"private address", "192.168.1.10:" + port, nil, "HostNotAllowed"},
			{"cross-site form", "localhost:" + port, map[string]string{"Origin": "https://evil.example"}, "CrossSiteRequest"},
			{"opaque origin", "localhost:" + port, map[string]string{"Origin": "null"}, "CrossSiteRequest"},
			{"cross-site fetch", "localhost:" + port, map[string]string{"Sec-Fetch-Site": "cross-site"}, "CrossSiteRequest"},
			{"localhost", "localhost:" + port, nil, ""},
			{"localhost without port", "localhost", nil, ""},
			{"upper case", "LOCALHOST:" + port, nil, ""},
			{"bucket name", "mybucket.localhost:" + port, nil, "S3"},
			{"ipv4 loopback", "127.0.0.1:" + port, nil, ""},
			{"ipv6 loopback", "[::1]:" + port, nil, ""},
			{"ipv6 loopback without port", "[::1]", nil, ""},
			{"a page on this machine", "localhost:" + port, map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, ""},
		} {
			queue := awslocal.UniqueName("host")
			code, body := send(tt.host, tt.header, queue)
			if tt.want == "S3" {
				if code == http.StatusForbidden || !strings.Contains(body, "<Error>") {
					t.Errorf("%s (Host %q): %d %s, want S3's answer", tt.name, tt.host, code, body)
				}
				continue
			}
			if tt.want != "" {
				if code != http.StatusForbidden || !strings.Contains(body, `"__type":"`+tt.want+`"`) || !strings.Contains(body, "embedded emulator") {
					t.Errorf("%s (Host %q): %d %s, want 403 %s", tt.name, tt.host, code, body, tt.want)
				}
				if exists(queue) {
					t.Errorf("%s (Host %q): the queue was created", tt.name, tt.host)
				}
				continue
			}
			if code != http.StatusOK || !exists(queue) {
				t.Errorf("%s (Host %q): %d %s, want the queue created", tt.name, tt.host, code, body)
			}
		}
		// The SDK reports the refusal's reason.
		cfg := b.Config.Copy()
		cfg.BaseEndpoint = aws.String("http://127.0.0.1:" + port)
		_, err = sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{}, func(o *sqs.Options) {
			o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("Origin", "https://evil.example"))
		})
		if err == nil || !strings.Contains(err.Error(), "CrossSiteRequest") || !strings.Contains(err.Error(), "refuses requests from web pages") {
			t.Errorf("the SDK's error = %v, want the refusal's code and reason", err)
		}
	}
}
