package sdkhttp

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

type recorder struct{ body io.ReadCloser }

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.body = req.Body
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(""))}, nil
}

// writerToBody is a body with WriteTo, like smithy-go's.
type writerToBody struct{ *bytes.Reader }

func (writerToBody) Close() error { return nil }

func TestKeepConnectionHidesWriteTo(t *testing.T) {
	if KeepConnection(nil) != nil {
		t.Error("nil is not kept nil")
	}
	rec := &recorder{}
	c := KeepConnection(rec)
	if KeepConnection(c) != c {
		t.Error("a wrapped client is wrapped again")
	}
	req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/", nil)
	req.Body = writerToBody{bytes.NewReader([]byte("payload"))}
	if _, ok := req.Body.(io.WriterTo); !ok {
		t.Fatal("test body has no WriteTo")
	}
	if _, err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.body.(io.WriterTo); ok {
		t.Error("the body handed to the HTTP client still offers WriteTo")
	}
	b, _ := io.ReadAll(rec.body)
	if string(b) != "payload" {
		t.Errorf("body %q", b)
	}
	req2, _ := http.NewRequest(http.MethodGet, "http://example.invalid/", http.NoBody)
	if _, err := c.Do(req2); err != nil || rec.body != http.NoBody {
		t.Errorf("NoBody changed: %v %T", err, rec.body)
	}
}
