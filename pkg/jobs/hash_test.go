package jobs_test

import (
	"errors"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

func TestPayloadHashIsCanonical(t *testing.T) {
	t.Parallel()
	a, err := jobs.PayloadHash("email.send", []byte(`{"to":"a@b.c","n":1.50,"tags":["x","y"]}`))
	if err != nil {
		t.Fatal(err)
	}
	same := []string{
		`{"n":1.50,"tags":["x","y"],"to":"a@b.c"}`,
		"{ \"tags\" : [\"x\", \"y\"],\n \"to\":\"a@b.c\", \"n\":1.50 }",
		`{"to":"a@\u0062.c","n":1.50,"tags":["x","y"]}`,
	}
	for _, s := range same {
		if b, err := jobs.PayloadHash("email.send", []byte(s)); err != nil || b != a {
			t.Errorf("PayloadHash(%s) = %s, %v; want %s", s, b, err, a)
		}
	}
	different := []struct{ kind, args string }{
		{"email.send", `{"to":"a@b.c","n":1.5,"tags":["x","y"]}`},  // numbers are kept as written
		{"email.send", `{"to":"a@b.c","n":1.50,"tags":["y","x"]}`}, // arrays keep their order
		{"sms.send", `{"to":"a@b.c","n":1.50,"tags":["x","y"]}`},   // the kind counts
	}
	for _, d := range different {
		if b, _ := jobs.PayloadHash(d.kind, []byte(d.args)); b == a {
			t.Errorf("PayloadHash(%s, %s) equals the original's", d.kind, d.args)
		}
	}
	if _, err := jobs.PayloadHash("k", []byte(`{"a":`)); err == nil {
		t.Error("invalid JSON must be an error")
	}
}

func TestDefer(t *testing.T) {
	t.Parallel()
	err := jobs.Defer(-1, nil)
	var d *jobs.DeferError
	if !errorsAs(err, &d) || d.Delay != 0 || err.Error() != "deferred for 0s" {
		t.Errorf("Defer(-1, nil) = %v", err)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
