package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sqsworker/sqsworker/pkg/console"
)

// A console mounted under a prefix of a service's own mux, read-only (no token), with only the
// parts at hand: here none, so every page says what it lacks. In a real service give it the
// job table, the DLQ, the schedule client, the producer and the queues (docs/CONSOLE.md).
func ExampleNew() {
	h, err := console.New(console.Config{Title: "myapp", Prefix: "/ops/jobs", ReadOnly: true})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/ops/jobs/", h) // behind your own authentication in a real service
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ops/jobs/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}
