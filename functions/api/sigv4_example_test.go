package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// postJob POSTs a job to the API's function URL (url, without the path), signed with SigV4 for
// the service "lambda", as a caller given GrantInvokeApi does. docs/FUNCTIONS.md shows it.
func postJob(ctx context.Context, client *http.Client, creds aws.CredentialsProvider, region, url, key string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/jobs", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	c, err := creds.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash) // signed too: the body is covered by the signature
	if err := v4.NewSigner().SignHTTP(ctx, c, req, hash, "lambda", region, time.Now()); err != nil {
		return nil, err
	}
	return client.Do(req)
}

// TestPostJobSigned: the request the SigV4 example sends carries a signature for the service
// lambda in the region, over the headers the API reads (the body's hash included).
func TestPostJobSigned(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "session-token")
	resp, err := postJob(context.Background(), srv.Client(), creds, "eu-west-1", srv.URL, "welcome-ada", []byte(`{"kind":"email.send","args":{"to":"ada@example.com"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	auth := got.Header.Get("Authorization")
	for _, want := range []string{"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/", "/eu-west-1/lambda/aws4_request", "idempotency-key", "x-amz-content-sha256", "x-amz-security-token"} {
		if !strings.Contains(auth+" "+fmt.Sprint(got.Header), want) {
			t.Errorf("signed request lacks %q: Authorization %q, headers %v", want, auth, got.Header)
		}
	}
	if got.URL.Path != "/jobs" || string(body) != `{"kind":"email.send","args":{"to":"ada@example.com"}}` {
		t.Errorf("request %s %s", got.URL.Path, body)
	}
}
