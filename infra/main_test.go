package main

import (
	"strings"
	"testing"
	"time"
)

func TestPropsFromContext(t *testing.T) {
	ctx := map[string]string{"stack": "demo", "fifo": "true", "timeout": "1m", "maxConcurrency": "50", "reservedConcurrency": "60"}
	p, err := PropsFromContext(func(k string) string { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "demo" || !p.FIFO || p.Timeout != time.Minute || p.MaxConcurrency != 50 || p.ReservedConcurrency != 60 {
		t.Fatalf("props = %+v", p)
	}
	p, err = PropsFromContext(func(string) string { return "" })
	if err != nil || p.Name != "sqsworker" {
		t.Fatalf("defaults: %+v, %v", p, err)
	}
	_, err = PropsFromContext(func(k string) string { return map[string]string{"fifo": "maybe", "timeout": "30"}[k] })
	if err == nil || !strings.Contains(err.Error(), `context fifo="maybe" is not a boolean`) || !strings.Contains(err.Error(), `context timeout="30" is not a Go duration`) {
		t.Fatalf("err = %v", err)
	}
}
